#!/usr/bin/env bash
# Runs every scenario for seeds 1..N (default 5) and prints one SHA-256 per
# output file, so two builds can be compared byte for byte:
#
#   ./scripts/sim-hashes.sh /tmp/before > before.txt   # on the old commit
#   ./scripts/sim-hashes.sh /tmp/after  > after.txt    # on the new one
#   diff before.txt after.txt
#
# summary.json is hashed without `wall_clock_s` and `peak_rss_kib`, the two
# figures that measure the machine rather than the simulation.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/sim-hashes.sh OUT_DIR [SEEDS]}
seeds=${2:-5}
cargo build --release -q -p doorman-sim
for s in $(seq 1 "$seeds"); do
  "${CARGO_TARGET_DIR:-target}/release/doorman-sim" all --seed "$s" --out "$out/seed$s" >/dev/null
done
cd "$out"
find . -type f ! -name summary.json ! -name 'summary.md' ! -name hashes.txt | sort | xargs sha256sum
for f in $(find . -name summary.json | sort); do
  grep -v -e '"wall_clock_s"' -e '"peak_rss_kib"' "$f" | sha256sum | sed "s|-|$f (without wall_clock_s, peak_rss_kib)|"
done
