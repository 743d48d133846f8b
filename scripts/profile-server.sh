#!/usr/bin/env bash
# Where a GetCapacity's server CPU goes, ours beside the no-op floor: each
# server (crates/doorman-server/benches/noop_floor.rs, then
# target/release/doorman with --min-request-interval 0 so every request is
# decided) is started fresh, loaded by `doorman loadtest` (10 000 clients,
# one FAIR_SHARE resource, concurrency 64 over 4 connections) and sampled
# by `perf record`; scripts/profile-layers.py turns both flat profiles (self
# time per symbol) into µs per RPC by layer (HTTP/2, protobuf, tonic/tower,
# tokio, our core, our shell, metrics, tracing, allocation, kernel, other)
# and lists the symbols that cost ours the most more than the floor. All on
# 127.0.0.1.
#
# Usage: scripts/profile-server.sh [SECONDS (10)]   (needs `perf`)
#        DOORMAN_BIN=PATH scripts/profile-server.sh …   (another build of ours)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
SECS=${1:-10}
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
if [ -z "${DOORMAN_BIN:-}" ]; then cargo build --release --bin doorman >&2; fi
B=${DOORMAN_BIN:-target/release/doorman}
FLOOR=$(floor_exe)
[ -x "$FLOOR" ] || { echo "cannot find the noop_floor executable" >&2; exit 1; }
WORK=$(mktemp -d)
SP=
trap '[ -n "$SP" ] && kill "$SP" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
fair_share_config "*" 1000000 3600 5 >"$WORK/c.toml"

# profile NAME PORT: loads and samples the server just started as $SP.
profile() {
    sleep 1
    DOORMAN_LOG=warn "$B" loadtest --server "127.0.0.1:$2" --clients 10000 --concurrency 64 \
        --connections 4 --duration $((SECS + 2)) --warmup 1 --server-pid "$SP" --json \
        >"$WORK/$1.json" &
    local lp=$!
    sleep 2
    perf record -F 1999 -p "$SP" -o "$WORK/$1.data" -- sleep "$SECS" 2>/dev/null >&2
    wait "$lp"
    kill "$SP"; wait "$SP" 2>/dev/null || true; SP=
    perf report -i "$WORK/$1.data" --no-children --sort symbol --stdio 2>/dev/null >"$WORK/$1.txt"
    python3 - "$1" "$WORK/$1.json" >>"$WORK/cpu" <<'PY'
import json, sys
r = json.load(open(sys.argv[2])); c = r["server_cpu"]
print(sys.argv[1], c["us_per_rpc"])
print(f"{sys.argv[1]}: {r['rpcs_per_s']:.0f} GetCapacity/s, server {c['us_per_rpc']:.1f} µs CPU per RPC, "
      f"{c['cores']:.2f} cores", file=sys.stderr)
PY
}

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name:\s*//p'), $(date -u +%Y-%m-%d)"
claim_port PORT
"$FLOOR" --listen "127.0.0.1:$PORT" >"$WORK/floor.log" 2>&1 &
SP=$!
profile floor "$PORT"
claim_port PORT
DOORMAN_LOG=warn "$B" server --config "$WORK/c.toml" --listen "127.0.0.1:$PORT" \
    --min-request-interval 0 >"$WORK/server.log" 2>&1 &
SP=$!
profile ours "$PORT"
read -r _ FLOOR_US < <(grep '^floor ' "$WORK/cpu")
read -r _ OURS_US < <(grep '^ours ' "$WORK/cpu")
[ -n "${PROFILE_KEEP:-}" ] && cp "$WORK"/*.txt "$PROFILE_KEEP"/
python3 scripts/profile-layers.py "$WORK/floor.txt" "$FLOOR_US" "$WORK/ours.txt" "$OURS_US"
