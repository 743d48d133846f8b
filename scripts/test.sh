#!/usr/bin/env bash
# The one test command. Each stage installs what it needs if it is missing
# (scripts/install.sh) and can run alone; with no stage named, all of them
# run, arranged for CI's two cores (below).
#
#   ./scripts/test.sh                       # everything
#   ./scripts/test.sh lint                  # one stage, or several:
#   ./scripts/test.sh unit integration
#   ./scripts/test.sh integration -- -p doorman-e2e   # args after -- go to cargo test
#   FUZZ_SECONDS=0 ./scripts/test.sh artefacts          # skip the bounded fuzzing
#
# Stages:
#   lint         fmt, clippy (with clippy.toml's rules), the core's and the
#                server's dependency trees, docs, module cycles, file and
#                function lengths
#   unit         cargo test of every library and binary, and the doc tests
#   integration  cargo test of every tests/ target (real servers, etcd,
#                Envoy, the client library; doorman-e2e)
#   artefacts    the Python wheel (installed without Rust, tested), the
#                release (one version, cargo publish --dry-run), the
#                container image, the Kubernetes manifests, bounded
#                fuzzing, the monitoring, the status page
#   e2e          the fault harness (short schedule, secure tree) and its
#                self-test, the simulator against a real tree, the original
#                Doorman in mixed trees
#   bench        the server benchmark against the original (short)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's line says how far the run is (s), so a CI log shows where
# the time goes.
log() { printf '==> [%4d s] %s\n' "$SECONDS" "$*" >&2; }
disk() { log "disk: target/ $(du -sh target 2>/dev/null | cut -f1), free $(df -h --output=avail . | tail -1 | tr -d ' ')"; }

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 1
fi
for tool in python3 apt-get; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: the test script needs it" >&2; exit 1; }
done
# protoc is not needed: build scripts use the vendored binary through
# tools/protoc (see .cargo/config.toml).
. scripts/install.sh

# A CI run builds once from a clean clone: incremental caches would only
# take disk (CI's is not ours to fill). Locally they speed up rebuilds.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi

STAGES="lint unit integration artefacts e2e bench"
stages=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case " $STAGES " in
    *" $1 "*) stages+=("$1") ;;
    *) echo "test.sh: unknown stage $1 (one of: $STAGES; cargo test args go after --)" >&2; exit 2 ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift
CARGO_TEST_ARGS=("$@")

# Stages that measure no time run at the lowest CPU and I/O priority while
# the fault harness runs beside them (see run_all).
NICE=""

. scripts/test-stages.sh

if [ ${#stages[@]} -eq 0 ]; then
  run_all
else
  for s in "${stages[@]}"; do "stage_$s"; done
fi
log "done"
