#!/usr/bin/env bash
# Ratios measured in one run on one machine (absolute figures don't travel
# between machines; ratios do): server CPU per GetCapacity and RPC/s of
#   * the no-op floor (crates/doorman-server/benches/noop_floor.rs: plain
#     tonic, answers without deciding),
#   * our server (target/release/doorman, --min-request-interval 0 so every
#     request is decided),
#   * the original Doorman server, if ORIGINAL_BIN=DIR holds its `doorman`
#     binary (built from youtube/doorman; not part of this repository),
# for 1, 1 000 and 10 000 clients on one FAIR_SHARE resource, with
# `doorman loadtest --server-pid` (concurrency 64 over 4 connections, the
# load generator on the same machine). Each server is started fresh for
# each run and stopped after it. The original binds all interfaces, so
# with ORIGINAL_BIN everything runs in a private network namespace
# (`unshare -n`, needs root) with only `lo` up.
#
# Usage: [ORIGINAL_BIN=DIR] scripts/bench-compare.sh [SECONDS (10)] [ROUNDS (1)]
#        DOORMAN_BIN=PATH scripts/bench-compare.sh …   (another build of ours)
#        BEFORE_BIN=PATH …   an earlier build of ours side by side ("before",
#                            the same load tool: ours), with each round's
#                            paired ratios ours ÷ before and ÷ floor
#        CLIENTS="1000" …    only these client counts (default 1 1000 10000)
#        PIN=1, FLOOR_ARGS=--nodelay: see below
#        BENCH_FLOOR=0 …   without the floor (no bench build: CI's short run
#                          against the original re-measures only its columns)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
SECS=${1:-10}
ROUNDS=${2:-1}
if [ "${BENCH_COMPARE_IN_NS:-}" != 1 ]; then
    if [ -z "${DOORMAN_BIN:-}" ]; then cargo build --release --bin doorman >&2; fi
    if [ "${BENCH_FLOOR:-1}" != 0 ]; then
        cargo bench -p doorman-server --bench noop_floor --no-run >&2
    fi
    if [ -n "${ORIGINAL_BIN:-}" ]; then
        [ -x "$ORIGINAL_BIN/doorman" ] || { echo "no $ORIGINAL_BIN/doorman" >&2; exit 2; }
        exec unshare -n env BENCH_COMPARE_IN_NS=1 "$0" "$@"
    fi
else
    ip link set lo up
fi
OURS=${DOORMAN_BIN:-target/release/doorman}
if [ -n "${BEFORE_BIN:-}" ]; then
    [ -x "$BEFORE_BIN" ] || { echo "no $BEFORE_BIN" >&2; exit 2; }
fi
CLIENTS=${CLIENTS:-1 1000 10000}
if [ "${BENCH_FLOOR:-1}" != 0 ]; then
    FLOOR=$(floor_exe)
    [ -x "$FLOOR" ] || { echo "cannot find the noop_floor executable" >&2; exit 1; }
fi
WORK=$(mktemp -d)
SP=
trap '[ -n "$SP" ] && kill "$SP" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
claim_port PORT
fair_share_config "*" 1000000 3600 5 >"$WORK/ours.toml"
# The original refuses a config without a "*" entry.
cat >"$WORK/original.yml" <<'YAML'
resources:
  - identifier_glob: "*"
    capacity: 1000000
    algorithm: {kind: FAIR_SHARE, lease_length: 3600, refresh_interval: 5, learning_mode_duration: 0}
YAML

start() {
    case $1 in
    floor) $SERVER_CPU "$FLOOR" --listen "127.0.0.1:$PORT" $FLOOR_ARGS >"$WORK/server.log" 2>&1 & ;;
    ours | before)
        local bin=$OURS
        [ "$1" = before ] && bin=$BEFORE_BIN
        DOORMAN_LOG=warn $SERVER_CPU "$bin" server --config "$WORK/ours.toml" --listen "127.0.0.1:$PORT" \
            --min-request-interval 0 >"$WORK/server.log" 2>&1 & ;;
    original) $SERVER_CPU "$ORIGINAL_BIN/doorman" -config="file:$WORK/original.yml" -port="$PORT" \
        -debug_port=$((PORT + 1)) -hostname=127.0.0.1 >"$WORK/server.log" 2>&1 & ;;
    esac
    SP=$!
    listening "$PORT" 5 && return
    echo "$1 did not start:" >&2; cat "$WORK/server.log" >&2; exit 1
}
stop() { kill "$SP"; wait "$SP" 2>/dev/null || true; SP=; }

# PIN=1: the server on CPU 0 and the load tool on the others (taskset).
# Off by default: on the 2-vCPU machine of BENCHMARKS.md pinning did not
# make runs steadier (ratios 1.51-1.73 pinned, 1.29-1.70 not, same builds).
SERVER_CPU= LOAD_CPU=
if [ "$(nproc)" -ge 2 ] && [ "${PIN:-0}" = 1 ]; then
    SERVER_CPU="taskset -c 0" LOAD_CPU="taskset -c 1-$(($(nproc) - 1))"
fi
# FLOOR_ARGS=--nodelay: the floor sets TCP_NODELAY as ours does.
FLOOR_ARGS=${FLOOR_ARGS:-}
SERVERS="floor ours"
[ "${BENCH_FLOOR:-1}" = 0 ] && SERVERS="ours"
[ -n "${BEFORE_BIN:-}" ] && SERVERS="$SERVERS before"
[ -n "${ORIGINAL_BIN:-}" ] && SERVERS="$SERVERS original"
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name:\s*//p'), $(date -u +%Y-%m-%d)"
: >"$WORK/runs"
for round in $(seq 1 "$ROUNDS"); do
    for clients in $CLIENTS; do
        # Each round starts one server later in the list, and every other
        # round goes through it backwards, so no server is always measured
        # first or right after another.
        read -ra list <<<"$SERVERS"
        n=${#list[@]}
        for i in "${!list[@]}"; do
            [ $((round % 2)) = 0 ] && i=$((n - 1 - i))
            s=${list[$(((i + round - 1) % n))]}
            start "$s"
            DOORMAN_LOG=warn $LOAD_CPU "$OURS" loadtest --server "127.0.0.1:$PORT" --clients "$clients" \
                --concurrency 64 --connections 4 --duration "$SECS" --warmup 2 \
                --server-pid "$SP" --json >"$WORK/r.json"
            stop
            python3 - "$s" "$clients" "$WORK/r.json" "$round" >>"$WORK/runs" <<'PY'
import json, sys
r = json.load(open(sys.argv[3]))
err = sum(r["errors"].values())
print(sys.argv[4], sys.argv[1], sys.argv[2], r["rpcs_per_s"], r["latency_us"]["p99"], r["server_cpu"]["us_per_rpc"], err)
PY
        done
    done
done
python3 - "$WORK/runs" "$SERVERS" "$CLIENTS" <<'PY'
import statistics
import sys
from collections import defaultdict
# (round, server, clients) -> (RPC/s, p99, CPU per RPC, errors)
measured = {}
for line in open(sys.argv[1]):
    rnd, s, c, rps, p99, cpu, err = line.split()
    measured[(int(rnd), s, int(c))] = (float(rps), float(p99), float(cpu), int(err))
runs = defaultdict(list)
for (_, s, c), v in measured.items():
    runs[(s, c)].append(v)
servers = sys.argv[2].split()
counts = [int(c) for c in sys.argv[3].split()]
mean = {k: [sum(x) / len(v) for x in zip(*v)] for k, v in runs.items()}
print()
print("| clients | server | GetCapacity/s | p99 µs | server CPU µs/RPC | errors |")
print("|---:|---|---:|---:|---:|---:|")
for c in counts:
    for s in servers:
        rps, p99, cpu, err = mean[(s, c)]
        print(f"| {c} | {s} | {rps:.0f} | {p99:.0f} | {cpu:.1f} | {err:.0f} |")
print()
others = [s for s in servers if s != "ours"]
head = " | ".join(f"CPU/RPC ours ÷ {o} | RPC/s ours ÷ {o}" for o in others)
print(f"| clients | {head} |")
print("|---:|" + "---:|" * (2 * len(others)))
for c in counts:
    o = mean[("ours", c)]
    cells = " | ".join(f"{o[2] / mean[(x, c)][2]:.2f} | {o[0] / mean[(x, c)][0]:.2f}" for x in others)
    print(f"| {c} | {cells} |")
if "before" in servers:
    # Each round's ratios, the builds measured next to each other.
    rounds = sorted({r for r, _, _ in measured})
    def ratios(c, a, b):
        return [measured[(r, a, c)][2] / measured[(r, b, c)][2] for r in rounds]
    floor = "floor" in servers
    print()
    print("| clients | CPU/RPC ours ÷ before, median of rounds (range) | ours below before |"
          + (" ÷ floor: ours | ÷ floor: before |" if floor else ""))
    print("|---:|---:|---:|" + ("---:|---:|" if floor else ""))
    for c in counts:
        d = ratios(c, "ours", "before")
        row = (f"| {c} | {statistics.median(d):.3f} ({min(d):.2f}–{max(d):.2f}) | "
               f"{sum(x < 1 for x in d)} of {len(d)} |")
        if floor:
            row += (f" {statistics.median(ratios(c, 'ours', 'floor')):.3f} |"
                    f" {statistics.median(ratios(c, 'before', 'floor')):.3f} |")
        print(row)
    if len(counts) > 1:
        # The code paths differ alike at every count: all rounds pooled.
        d = [x for c in counts for x in ratios(c, "ours", "before")]
        print(f"| all | {statistics.median(d):.3f} ({min(d):.2f}–{max(d):.2f}) | "
              f"{sum(x < 1 for x in d)} of {len(d)} |" + (" | |" if floor else ""))
PY
