#!/usr/bin/env bash
# Server benchmarks for BENCHMARKS.md, all on 127.0.0.1:
#  * GetCapacity throughput, latency and server CPU per RPC with 1, 1 000 and
#    10 000 clients on one FAIR_SHARE resource, and 1 000 clients × 10
#    resources per request (`doorman loadtest`, load generator on the same
#    machine as the server);
#  * server RSS per live lease at 100 k and 1 M leases.
# The server runs with --min-request-interval 0 so every request runs the
# algorithm (no repeat-request shortcut).
#   ./scripts/bench-server.sh            # everything (~2 minutes)
#   SECS=5 ./scripts/bench-server.sh     # shorter runs
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh

SECS="${SECS:-10}"
PORT="${PORT:-17500}"
HTTP=$((PORT + 1))
cargo build --release --bin doorman >&2
B=target/release/doorman
TICK=$(getconf CLK_TCK)
CFG=$(mktemp)
trap 'rm -f "$CFG"; [ -n "${SP:-}" ] && kill "$SP" 2>/dev/null || true' EXIT
fair_share_config "loadtest-*" 500 3600 5 >"$CFG"

start_server() {
  DOORMAN_LOG=warn "$B" server --config "$CFG" --listen "127.0.0.1:$PORT" --http "127.0.0.1:$HTTP" \
    --min-request-interval 0 >/dev/null 2>&1 &
  SP=$!
  for _ in $(seq 1 100); do
    curl -s "127.0.0.1:$HTTP/healthz" >/dev/null 2>&1 && return
    sleep 0.05
  done
  echo "server did not start" >&2; exit 1
}
stop_server() { kill "$SP"; wait "$SP" 2>/dev/null || true; SP=; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SP/stat"; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$SP/status"; }
served() { curl -s "127.0.0.1:$HTTP/metrics" | awk '/^doorman_server_requests_total\{method="GetCapacity"\}/ {print $2}' | sed 's/^$/0/'; }
leases() { curl -s "127.0.0.1:$HTTP/api/v1/status?leases=0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["leases"])'; }

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name:\s*//p'), $(date -u +%Y-%m-%d)"
echo
echo "| clients × resources | GetCapacity/s | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | errors | server CPU µs/RPC |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for spec in "1 1" "1000 1" "10000 1" "1000 10"; do
  read -r clients resources <<<"$spec"
  start_server
  c0=$(cpu_ticks); n0=$(served)
  json=$(DOORMAN_LOG=warn "$B" loadtest --server "127.0.0.1:$PORT" --clients "$clients" --resources "$resources" \
    --concurrency 64 --connections 4 --duration "$SECS" --warmup 2 --json)
  c1=$(cpu_ticks); n1=$(served)
  stop_server
  python3 - "$json" "$clients" "$resources" "$c0" "$c1" "$n0" "$n1" "$TICK" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); clients, res = sys.argv[2], sys.argv[3]
c0, c1, n0, n1, tick = (float(x or 0) for x in sys.argv[4:9])
l = r["latency_us"]; err = sum(r["errors"].values())
cpu = (c1 - c0) / tick / max(n1 - n0, 1) * 1e6
print(f"| {clients} × {res} | {r['rpcs_per_s']:.0f} | {l['p50']} | {l['p90']} | {l['p99']} | {l['p999']} | {l['max']} | {err} | {cpu:.1f} |")
PY
done

echo
echo "| live leases | RSS before | RSS after | bytes per lease |"
echo "|---:|---:|---:|---:|"
for n in 100000 1000000; do
  start_server
  r0=$(rss_kb)
  # Each client asks once (or more): enough seconds for n requests at >= 15k/s
  # (at 40k/s, the first estimate, half of 1 M clients had no lease yet on
  # a slower day; the table counts the leases it finds).
  DOORMAN_LOG=warn "$B" loadtest --server "127.0.0.1:$PORT" --clients "$n" --resources 1 \
    --concurrency 64 --connections 4 --duration $((n / 15000 + 3)) --warmup 0 --json >/dev/null
  got=$(leases); r1=$(rss_kb)
  stop_server
  echo "| $got | $((r0 / 1024)) MiB | $((r1 / 1024)) MiB | $(( (r1 - r0) * 1024 / got )) |"
done
