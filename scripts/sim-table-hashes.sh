#!/bin/sh
# The gate on docs/sim-vs-real.md's table (issue 46): the table was
# measured by running the simulator and the real tree on the same plans;
# its simulated half is deterministic, so this script runs it again (the
# table's scenario, profile and seeds, as scripts/sim-vs-real.sh does:
# each seed on its own phases, whose plan the real tree replayed, and on
# the real run's phases, `--replay-asks` with the asks recorded beside the
# table in docs/simulation/asks/) and compares each output file with the
# SHA-256 recorded when the table was measured. A change that moves the
# simulation fails CI here until the table is measured again and the
# hashes recorded with it.
#
#   scripts/sim-table-hashes.sh           # check: exit 1 on any difference
#   scripts/sim-table-hashes.sh --write   # record (after re-measuring)
#
# Re-measuring: scripts/sim-vs-real.sh --seeds "1 2 3 4 5" (an hour of
# real time, as root), then the table and its "measured at" line in
# docs/sim-vs-real.md, each real run's asks.csv copied to
# docs/simulation/asks/seed-N.csv, then --write; commit them together.
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
asks=docs/simulation/asks
rm -rf "$out"
mkdir -p "$out/pinned"
for seed in $seeds; do
  target/release/doorman-sim run "$scenario" --profile "$profile" --seed "$seed" \
    --out "$out/seed-$seed" >/dev/null
  if [ ! -f "$asks/seed-$seed.csv" ]; then
    echo "sim-table-hashes: no $asks/seed-$seed.csv (the real run's asks the table was measured with)" >&2
    exit 1
  fi
  target/release/doorman-sim run "$scenario" --profile "$profile" --seed "$seed" \
    --replay-asks "$asks/seed-$seed.csv" --out "$out/pinned/seed-$seed" >/dev/null 2>&1
done
# Every file of each run that the comparison reads or replays; not
# summary.json, whose wall-clock and memory figures measure the machine.
hashes=$(cd "$out" && find . \( -name timeseries.csv -o -name nodes.csv -o -name events.csv \
  -o -name plan.json -o -name replay.json \) | LC_ALL=C sort | xargs sha256sum)

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
