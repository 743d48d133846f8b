#!/usr/bin/env bash
# The root does not care how many clients exist: the simulator (the real
# server and client cores under virtual time) runs a fixed tree of 1 root,
# 30 parents and 1 020 leaves (34 per parent) with 1, 10, 100 and 1 000
# clients per leaf (simulations/scenarios/root-scale/*.toml, 5 simulated
# minutes, seed 1) and prints the root's capacity RPCs per simulated second
# and its live leases and resources at the end (its state, and so its
# memory, grows with these), with the simulator's own wall time and peak
# memory. Without an argument the 1 M-client run is left out (28 min and
# 2.6 GiB on a 2-core machine, BENCHMARKS.md); give `all` to include it.
#
# Usage: scripts/root-scale.sh [all]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES="1k 10k 100k"
[ "${1:-}" = all ] && SIZES="$SIZES 1m"
cargo build --release -p doorman-sim >&2
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name:\s*//p'), $(date -u +%Y-%m-%d)"
echo
echo "| clients | root capacity RPC/s | root leases | root resources | sim wall s | sim peak RSS MiB |"
echo "|---:|---:|---:|---:|---:|---:|"
for s in $SIZES; do
    target/release/doorman-sim run "simulations/scenarios/root-scale/$s.toml" --out "$OUT/$s" >/dev/null
    python3 - "$OUT/$s/summary.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
root = r["root"]
print(f"| {r['clients']} | {root['rpcs_per_s']:.2f} | {root['leases']} | {root['resources']} | "
      f"{r['wall_clock_s']:.0f} | {r['peak_rss_kib'] / 1024:.0f} |")
PY
done
