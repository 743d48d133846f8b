#!/usr/bin/env bash
# Where a GetCapacity's server CPU goes: `perf record` of target/release/doorman
# under `doorman loadtest` (10 000 clients, one FAIR_SHARE resource,
# concurrency 64 over 4 connections, --min-request-interval 0 so every request
# is decided), then the flat profile (self time per symbol) summed by layer:
# HTTP/2, protobuf, gRPC/tonic+tower, tokio, our core, our shell, metrics,
# tracing, allocation, kernel (syscalls, TCP), other. Prints the layer table
# and the top 25 symbols. All on 127.0.0.1.
#
# Usage: scripts/profile-server.sh [SECONDS (10)]   (needs `perf`)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
SECS=${1:-10}
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
cargo build --release --bin doorman >&2
B=target/release/doorman
WORK=$(mktemp -d)
SP=
trap '[ -n "$SP" ] && kill "$SP" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
PORT=$(free_port)
fair_share_config "*" 1000000 3600 5 >"$WORK/c.toml"
DOORMAN_LOG=warn "$B" server --config "$WORK/c.toml" --listen "127.0.0.1:$PORT" \
    --min-request-interval 0 >"$WORK/server.log" 2>&1 &
SP=$!
sleep 1
DOORMAN_LOG=warn "$B" loadtest --server "127.0.0.1:$PORT" --clients 10000 --concurrency 64 \
    --connections 4 --duration $((SECS + 2)) --warmup 1 --server-pid "$SP" --json >"$WORK/load.json" &
LP=$!
sleep 2
perf record -F 1999 -p "$SP" -o "$WORK/perf.data" -- sleep "$SECS" 2>/dev/null >&2
wait "$LP"
python3 - "$WORK/load.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); c = r["server_cpu"]
print(f"load: {r['rpcs_per_s']:.0f} GetCapacity/s, server {c['us_per_rpc']:.1f} µs CPU per RPC, {c['cores']:.2f} cores")
PY
perf report -i "$WORK/perf.data" --no-children --sort symbol --stdio 2>/dev/null |
    python3 -c '
import re, sys
layers = [
    ("kernel (syscalls, TCP, scheduling)", r"^\[k\]"),
    ("allocation", r"malloc|free|realloc|calloc|_int_|alloc::|cfree|tcache|arena"),
    ("HTTP/2 (h2, hyper)", r"\bh2::|hyper::|hpack"),
    ("protobuf (prost)", r"prost::|doorman_proto::|encode|decode"),
    ("tonic / tower", r"tonic::|tower::|tower_http::|http_body|axum::"),
    ("tokio", r"tokio::|mio::|parking|futex"),
    ("core (doorman_core, algorithms)", r"doorman_core::|doorman_algorithms::|indexmap::|hashbrown::"),
    ("our shell (doorman_server)", r"doorman_server::"),
    ("metrics", r"prometheus|metrics::"),
    ("tracing", r"tracing"),
    ("memcpy / memmove", r"memcpy|memmove|memset|memcmp"),
]
total = {}
top = []
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+(\[.\])\s+(.*)", line)
    if not m:
        continue
    pct, kind, sym = float(m.group(1)), m.group(2), m.group(3).strip()
    top.append((pct, kind, sym))
    name = "other"
    for layer, rx in layers:
        if re.search(rx, kind + " " + sym):
            name = layer
            break
    total[name] = total.get(name, 0.0) + pct
print()
print("| layer | share of server CPU |")
print("|---|---:|")
for k, v in sorted(total.items(), key=lambda kv: -kv[1]):
    print(f"| {k} | {v:.1f} % |")
print()
print("top symbols (self time):")
for pct, kind, sym in top[:25]:
    print(f"  {pct:5.2f}% {kind} {sym[:110]}")
'
