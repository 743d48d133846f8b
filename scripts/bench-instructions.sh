#!/usr/bin/env bash
# Instructions per GetCapacity of one or more server builds, counted by
# valgrind's callgrind: a measure that does not move with the machine's
# load, so two builds' difference of 1-2 % shows where bench-compare's
# CPU time (±10 % between runs on a 2-vCPU VM) cannot. What it does not
# see: cache misses, lock contention, the kernel's share.
#
# Usage: scripts/bench-instructions.sh [SECONDS (10)] BIN [BIN…]
#        CLIENTS="1000" …   only these client counts (default 1 1000 10000)
#        PROTOCOL=stream …  renewals on lease streams (CapacityStream), one
#                           per holder, instead of unary GetCapacity
#
# For each build and client count: the server (FAIR_SHARE, every request
# decided) under callgrind, 3 s of `doorman loadtest` to warm it up, the
# counters zeroed, SECONDS of load (16 in flight over 4 connections; the
# load tool is target/release/doorman, or LOAD_BIN, the same for every
# build), the counters dumped: instructions ÷ GetCapacity answered in that
# window (the few in flight at its edges make the count uncertain by
# about 0.3 %). Needs valgrind (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
SECS=10
if [[ ${1:-} =~ ^[0-9]+$ ]]; then SECS=$1; shift; fi
[ $# -ge 1 ] || { echo "usage: $0 [SECONDS] BIN [BIN…]" >&2; exit 2; }
command -v callgrind_control >/dev/null || { echo "needs valgrind (callgrind)" >&2; exit 2; }
LOAD=${LOAD_BIN:-target/release/doorman}
[ -x "$LOAD" ] || { echo "no load tool $LOAD (cargo build --release)" >&2; exit 2; }
CLIENTS=${CLIENTS:-1 1000 10000}
PROTOCOL=${PROTOCOL:-capacity}
WORK=$(mktemp -d)
SP=
trap '[ -n "$SP" ] && kill "$SP" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
fair_share_config "*" 1000000 3600 5 >"$WORK/c.toml"

# One build at one client count: prints "instructions rpcs".
count() {
    local bin=$1 clients=$2 port
    claim_port port
    rm -f "$WORK"/cg.*
    DOORMAN_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.%p" \
        "$bin" server --config "$WORK/c.toml" --listen "127.0.0.1:$port" \
        --min-request-interval 0 >"$WORK/server.log" 2>&1 &
    SP=$!
    listening "$port" 60 || { echo "$bin did not start:" >&2; cat "$WORK/server.log" >&2; exit 1; }
    load() {
        DOORMAN_LOG=warn "$LOAD" loadtest --server "127.0.0.1:$port" --clients "$clients" \
            --protocol "$PROTOCOL" \
            --concurrency 16 --connections 4 --duration "$1" --warmup 0 --json >"$WORK/r.json"
    }
    load 3
    callgrind_control -z "$SP" >/dev/null 2>&1
    load "$SECS"
    callgrind_control -d "$SP" >/dev/null 2>&1
    kill "$SP"
    wait "$SP" 2>/dev/null || true
    SP=
    python3 - "$WORK" <<'PY'
import glob, json, re, sys
w = sys.argv[1]
dump = [f for f in glob.glob(f"{w}/cg.*") if re.search(r"\.1$", f)]
total = None
for line in open(dump[0]):
    if line.startswith("summary:") or line.startswith("totals:"):
        total = int(line.split()[1])
r = json.load(open(f"{w}/r.json"))
print(total, r["rpcs"], sum(r["errors"].values()))
PY
}

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name:\s*//p'), $(date -u +%Y-%m-%d)"
echo
echo "protocol: $PROTOCOL"
echo
echo "| clients | build | GetCapacity answered | instructions per GetCapacity | errors |"
echo "|---:|---|---:|---:|---:|"
declare -A per
for clients in $CLIENTS; do
    for bin in "$@"; do
        # Not in a subshell: the EXIT trap must see the server's pid.
        count "$bin" "$clients" >"$WORK/counted"
        read -r ir rpcs errors <"$WORK/counted"
        [ "$rpcs" -gt 0 ] || { echo "$bin answered nothing at $clients clients" >&2; exit 1; }
        per[$clients,$bin]=$((ir / rpcs))
        echo "| $clients | $bin | $rpcs | ${per[$clients,$bin]} | $errors |"
    done
done
if [ $# -ge 2 ]; then
    echo
    echo "| clients | $2 ÷ $1 |"
    echo "|---:|---:|"
    for clients in $CLIENTS; do
        python3 -c "print('| $clients | %.4f |' % (${per[$clients,$2]} / ${per[$clients,$1]}))"
    done
fi
