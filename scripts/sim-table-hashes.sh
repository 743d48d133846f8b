#!/bin/sh
# The gate on docs/sim-vs-real.md's table (issue 46): the table was
# measured by running the simulator and the real tree on the same plans;
# its simulated half is deterministic, so this script runs it again (the
# table's scenario, profile and seeds, as scripts/sim-vs-real.sh does) and
# compares each output file with the SHA-256 recorded when the table was
# measured. A change that moves the simulation fails CI here until the
# table is measured again and the hashes recorded with it.
#
#   scripts/sim-table-hashes.sh           # check: exit 1 on any difference
#   scripts/sim-table-hashes.sh --write   # record (after re-measuring)
#
# Re-measuring: scripts/sim-vs-real.sh --seeds "1 2 3 4 5" (an hour of
# real time, as root), then the table and its "measured at" line in
# docs/sim-vs-real.md, then --write; commit them together.
set -eu
cd "$(dirname "$0")/.."

record=docs/simulation/sim-vs-real-table.sha256
scenario=simulations/scenarios/real-tree.toml
profile=ours
seeds="1 2 3 4 5"
out=target/sim-table
mode=${1:-check}
case "$mode" in
  check | --write) ;;
  *) echo "sim-table-hashes: unknown argument $mode (none, or --write)" >&2; exit 2 ;;
esac

cargo build --release --quiet -p doorman-sim --bins
rm -rf "$out"
mkdir -p "$out"
for seed in $seeds; do
  target/release/doorman-sim run "$scenario" --profile "$profile" --seed "$seed" \
    --out "$out/seed-$seed" >/dev/null
done
# Every file of each run that the comparison reads or replays; not
# summary.json, whose wall-clock and memory figures measure the machine.
hashes=$(cd "$out" && find . \( -name timeseries.csv -o -name nodes.csv -o -name events.csv \
  -o -name plan.json \) | LC_ALL=C sort | xargs sha256sum)

if [ "$mode" = --write ]; then
  printf '%s\n' "$hashes" >"$record"
  echo "sim-table-hashes: recorded $(printf '%s\n' "$hashes" | wc -l) files in $record" >&2
  exit 0
fi
if ! printf '%s\n' "$hashes" | diff -u "$record" - >"$out/hashes.diff"; then
  cat "$out/hashes.diff" >&2
  echo "sim-table-hashes: the simulator's output for docs/sim-vs-real.md's table" \
    "($scenario, $profile, seeds $seeds) is not what the table was measured with." \
    "Re-measure it (see this script's header) and record the hashes." >&2
  exit 1
fi
echo "sim-table-hashes: the table's $(printf '%s\n' "$hashes" | wc -l) simulated files match $record" >&2
