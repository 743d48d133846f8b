#!/usr/bin/env bash
# ShouldRateLimit (Envoy's RLS) next to GetCapacity, in one run on one
# server: starts target/release/doorman on 127.0.0.1 (one template "*",
# FAIR_SHARE, capacity 1e6), then runs `doorman loadtest` alternately with
# --protocol capacity and --protocol rls (ROUNDS times each, 1 000 clients,
# one resource, concurrency 64 over 4 connections, SECONDS each, no
# warm-up so the server's CPU time covers exactly the RPCs counted), and
# prints RPC/s, latency and the server's CPU per request (from
# /proc/PID/stat) for each run, then the rls/capacity ratios of the means.
#
# Usage: scripts/bench-rls.sh [SECONDS (default 10)] [ROUNDS (default 2)]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
SECONDS_=${1:-10}
ROUNDS=${2:-2}
BIN=target/release/doorman
[ -x "$BIN" ] || cargo build --release --bin doorman
WORK=$(mktemp -d)
claim_port GRPC_PORT
GRPC=127.0.0.1:$GRPC_PORT
fair_share_config "*" 1000000 60 5 >"$WORK/config.toml"
"$BIN" server --config "$WORK/config.toml" --listen "$GRPC" --min-request-interval 0 \
    >"$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
sleep 1
TICKS=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }
for _ in $(seq "$ROUNDS"); do
    for proto in capacity rls; do
        c0=$(cpu)
        "$BIN" loadtest --server "$GRPC" --protocol "$proto" --clients 1000 --concurrency 64 \
            --connections 4 --warmup 0 --duration "$SECONDS_" --json >"$WORK/run.json"
        c1=$(cpu)
        python3 - "$proto" "$c0" "$c1" "$TICKS" "$WORK/run.json" <<'PY' | tee -a "$WORK/runs.txt"
import json, sys
proto, c0, c1, ticks, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
r = json.load(open(path))
cpu_us = (c1 - c0) / ticks * 1e6 / max(r["rpcs"], 1)
l = r["latency_us"]
print(f"{proto} {r['rpcs_per_s']:.0f} {l['p50']} {l['p99']} {cpu_us:.1f}")
PY
    done
done
python3 - "$WORK/runs.txt" <<'PY'
import sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p, rps, p50, p99, cpu = line.split()
    runs[p].append((float(rps), float(p50), float(p99), float(cpu)))
mean = {p: [sum(x) / len(x) for x in zip(*v)] for p, v in runs.items()}
print("protocol   RPC/s   p50 us   p99 us   server CPU us/RPC")
for p, (rps, p50, p99, cpu) in mean.items():
    print(f"{p:9} {rps:7.0f} {p50:8.0f} {p99:8.0f} {cpu:10.1f}")
c, r = mean["capacity"], mean["rls"]
print(f"rls / capacity: RPC/s {r[0]/c[0]:.2f}, p99 {r[2]/c[2]:.2f}, CPU per RPC {r[3]/c[3]:.2f}")
PY
