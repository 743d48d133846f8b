#!/bin/sh
# One scenario run both ways and compared (issue 36; docs/sim-vs-real.md):
# for each seed, the simulator
# runs it (`doorman-sim run`, which also writes the schedule it realised,
# `plan.json`), then the fault harness replays that plan on real `doorman`
# processes, a real etcd and real clients in network namespaces
# (`doorman-faults scenario`, as root). The simulator then runs the seed
# again with each node asking its parent when the real one did
# (`scripts/upstream-trace.py --asks`, `doorman-sim run --replay-asks`:
# both trees renew in the same phase; docs/sim-vs-real.md), and
# `doorman-sim compare` sets that run beside the real one and checks the
# targets (exit status 1 when missed). The first simulated run, on its own
# phases, is compared too, for the record (`OUT/unpinned`, not gated).
#
#   scripts/sim-vs-real.sh [--scenario FILE] [--profile P] [--seeds "1 2 3"] [--out DIR]
#
# Defaults: simulations/scenarios/real-tree.toml, profile `ours`, seeds
# 1 2 3, target/sim-vs-real/<profile>. Needs root (or sudo), iproute2,
# nftables and etcd (`ETCD_BIN` or on the PATH). Each seed takes the
# scenario's duration in real time (12 minutes for `ours`, 3 for
# `short`).
set -eu
cd "$(dirname "$0")/.."

scenario=simulations/scenarios/real-tree.toml
profile=ours
seeds="1 2 3"
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --scenario) scenario=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "sim-vs-real: unknown argument $1" >&2; exit 2 ;;
  esac
done
out=${out:-target/sim-vs-real/$profile}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

# The same build as scripts/test.sh's fault harness stage (nothing to do
# when it ran): the servers, the harness, its clients and the simulator,
# all release (the workspace's features are one set, so this shares the
# image's artefacts).
cargo build --release --quiet -p doorman-faults -p doorman-cli -p doorman-sim --bins
rm -rf "$out"
mkdir -p "$out/sim" "$out/real" "$out/pinned"
for seed in $seeds; do
  echo "sim-vs-real: seed $seed: simulated" >&2
  target/release/doorman-sim run "$scenario" --profile "$profile" --seed "$seed" \
    --out "$out/sim/seed-$seed" >/dev/null
  echo "sim-vs-real: seed $seed: real processes" >&2
  real="$out/real/seed-$seed"
  $SUDO target/release/doorman-faults scenario "$scenario" --profile "$profile" \
    --sim "$out/sim/seed-$seed" --out "$real" \
    --doorman target/release/doorman
  echo "sim-vs-real: seed $seed: simulated on the real run's phases" >&2
  python3 scripts/upstream-trace.py "$real" --out "$real/upstream.csv" --asks "$real/asks.csv"
  target/release/doorman-sim run "$scenario" --profile "$profile" --seed "$seed" \
    --replay-asks "$real/asks.csv" --out "$out/pinned/seed-$seed" >/dev/null
  # The replay changes no draw of the world's: the same plan, or the two
  # runs are not of one hour.
  cmp "$out/sim/seed-$seed/plan.json" "$out/pinned/seed-$seed/plan.json"
done
target/release/doorman-sim compare "$out/sim" "$out/real" --out "$out/unpinned" >/dev/null
target/release/doorman-sim compare "$out/pinned" "$out/real" --out "$out" --check
