#!/bin/sh
# One scenario run both ways and compared (issue 36; docs/sim-vs-real.md):
# for each seed, the simulator
# runs it (`doorman-sim run`, which also writes the schedule it realised,
# `plan.json`), then the fault harness replays that plan on real `doorman`
# processes, a real etcd and real clients in network namespaces
# (`doorman-faults scenario`, as root), and `doorman-sim compare` sets
# the two side by side and checks the targets (exit status 1 when missed).
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
mkdir -p "$out/sim" "$out/real"
for seed in $seeds; do
  echo "sim-vs-real: seed $seed: simulated" >&2
  target/release/doorman-sim run "$scenario" --profile "$profile" --seed "$seed" \
    --out "$out/sim/seed-$seed" >/dev/null
  echo "sim-vs-real: seed $seed: real processes" >&2
  $SUDO target/release/doorman-faults scenario "$scenario" --profile "$profile" \
    --sim "$out/sim/seed-$seed" --out "$out/real/seed-$seed" \
    --doorman target/release/doorman
done
target/release/doorman-sim compare "$out/sim" "$out/real" --out "$out" --check
