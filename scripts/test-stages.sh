# The stages of scripts/test.sh (sourced by it: log, disk, NICE,
# CARGO_TEST_ARGS and scripts/install.sh's need_* come from there). Each
# stage_NAME runs alone; run_all runs every stage, the fault harness in the
# background beside those that measure no time.

# The release server, by absolute path: the checks start it from folders
# of their own.
#
# Release builds of everything that runs as a user runs it (the image's
# server, the harness and its clients, the simulator, the servers of the
# artefact checks): one set of artefacts, the workspace's features being
# one set. A thousand clients on one leaf starve debug builds on two cores
# (a debug leaf lost its election under them). A no-op once built.
build_release() {
  log "release build: the server, the fault harness, the simulator"
  $NICE cargo build --release --quiet -p doorman-faults -p doorman-cli -p doorman-sim -p doorman-pki --bins
}

stage_lint() {
  log "cargo fmt --check"
  cargo fmt --all -- --check

  log "cargo clippy (all targets, warnings are errors; clippy.toml's rules)"
  # The core holds no lock and starts no thread, and time is read only in
  # the clock modules: clippy.toml at the root and
  # crates/doorman-core/clippy.toml (`disallowed-methods`, `-types`).
  cargo clippy --workspace --all-targets --quiet -- -D warnings

  log "doorman-core stays sans-IO (no runtime, RPC, HTTP or etcd crates)"
  if cargo tree -p doorman-core -e normal --prefix none \
      | grep -E '^(tokio|tonic|hyper|axum|etcd-client|tracing-subscriber) '; then
    echo "doorman-core must not depend on the crates above" >&2
    exit 1
  fi

  log "the server and the client library do not depend on each other"
  if cargo tree -p doorman-server -e all --prefix none | grep -E '^doorman-client '; then
    echo "doorman-server must not depend on doorman-client (the Connector is doorman-net's)" >&2
    exit 1
  fi

  log "cargo doc (broken or private intra-doc links are errors)"
  RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links" cargo doc --workspace --no-deps --quiet

  log "no module cycles"
  python3 scripts/module-cycles.py crates/*/src simulations/src

  log "no file over 500 lines, no function over 60 (outside tests)"
  python3 scripts/structure.py crates/*/src simulations/src clients/python/src
}

stage_unit() {
  log "cargo test: libraries and binaries"
  cargo test --workspace --no-fail-fast --lib --bins "${CARGO_TEST_ARGS[@]}"
  log "cargo test: doc tests"
  cargo test --workspace --no-fail-fast --doc "${CARGO_TEST_ARGS[@]}"
}

# Real etcd for the election and config-push tests; a real Envoy 1.40 for
# the Envoy tests (crates/doorman-e2e/tests/envoy.rs), which fail, not
# skip, without it. The client's example tests run the built examples.
stage_integration() {
  need_etcd
  need_envoy
  log "cargo build --examples (the client's example tests run them)"
  cargo build --workspace --examples --quiet
  log "cargo test: every tests/ target"
  cargo test --workspace --no-fail-fast --test '*' "${CARGO_TEST_ARGS[@]}"
}

# The Python client (clients/python, PyO3 + maturin): built into a venv
# under target/ and tested with pytest against real servers.
python_client() {
  log "Python client"
  DOORMAN_BIN="$PWD/target/release/doorman" ./scripts/python-client-check.sh
}

# The container image (deploy/Dockerfile, target runtime-from-host) from
# the release binary, built with podman on a Debian base made locally
# (../shared/tools/container/podman-env.sh: no registry is reachable), and
# run: a root electing through etcd and a leaf below it, a lease taken, a
# scrape, SIGTERM as PID 1 (scripts/image-check.py). Sets IMAGE.
image() {
  PODMAN_ENV=${PODMAN_ENV:-../shared/tools/container/podman-env.sh}
  export PODMAN_ENV
  log "container image: build (podman) and run"
  IMAGE=$($NICE ./scripts/image.sh | tail -1)
  eval "$(sh "$PODMAN_ENV" "$PWD/target/podman")"
}

# The Kubernetes manifests (deploy/kubernetes), without a cluster: rendered
# with kustomize, validated against the Kubernetes schemas, and every pod
# of each overlay run on 127.0.0.1 from its manifest until its readiness
# probe answers (scripts/k8s-check.py), the Doorman pods as containers of
# the image.
kubernetes() {
  need_k8s
  log "Kubernetes manifests: render, validate, smoke test (pods from the image $IMAGE)"
  DOORMAN_BIN="$PWD/target/release/doorman" DOORMAN_IMAGE="$IMAGE" $NICE "$K8S_VENV/bin/python" scripts/k8s-check.py
}

# Fuzzing, bounded: config parsing and request validation (fuzz/, through
# doorman-wire: the server is not built). cargo fuzz passes -Z flags to
# rustc; no nightly toolchain can be fetched here, so RUSTC_BOOTSTRAP lets
# the stable one accept them (without a sanitizer: libFuzzer's coverage
# only). Built unoptimised (--dev, with debug assertions and overflow
# checks).
fuzz() {
  FUZZ_SECONDS=${FUZZ_SECONDS:-20}
  [ "$FUZZ_SECONDS" != 0 ] || return 0
  need_cargo_fuzz
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
}

# Monitoring (deploy/grafana, deploy/prometheus): the dashboard's
# structure, promtool check and unit tests of the alert rules, and every
# metric name they use against a real root and leaf. Then the status page
# as headless Chromium renders it: a three-level tree's pages checked and
# screenshotted into target/artefacts/.
pages() {
  need_promtool
  log "monitoring: dashboard, alert rules, and the metric names they use against real servers"
  DOORMAN_BIN="$PWD/target/release/doorman" $NICE python3 scripts/check-monitoring.py
  need_chromium
  log "status page in headless Chromium"
  DOORMAN_BIN="$PWD/target/release/doorman" $NICE python3 scripts/status-page-check.py
}

# The release: one version everywhere, and the published crates packaged
# and built from their packages (scripts/release-check.sh).
release() {
  log "release: one version; cargo publish --dry-run of doorman-client and what it needs"
  DOORMAN_BIN="$PWD/target/release/doorman" $NICE ./scripts/release-check.sh
}

# What stage_artefacts runs once the release build and the Python client
# are there (run_all runs these beside the fault harness).
artefacts_after_python() {
  release
  image
  kubernetes
  fuzz
  pages
}

stage_artefacts() {
  need_etcd
  build_release
  python_client
  artefacts_after_python
}

# The fault harness (crates/doorman-faults; docs/faults.md): a tree of real doorman processes, a three-member etcd cluster
# and real clients (the Rust library, the Python package, the original
# Doorman's Go client), each in its own network namespace, under a short
# seeded schedule with every fault kind alone and in pairs, on the secure
# tree, judged by an auditor outside the servers; and the self-test, which
# must see a client that ignores its lease's end take the tree over the
# capacity. Needs root (network namespaces). Started in the background:
# harness_wait collects both.
harness_start() {
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
}

harness_wait() {
  log "fault harness: waiting for the short schedule and the self-test"
  local faults_ok=0 selftest_ok=0
  wait "$faults_pid" || faults_ok=$?
  wait "$selftest_pid" || selftest_ok=$?
  trap - EXIT
  cat target/faults.log >&2
  cat target/faults-selftest.log >&2
  if [ "$faults_ok" != 0 ] || [ "$selftest_ok" != 0 ]; then
    echo "the fault harness failed (run: exit $faults_ok, self-test: exit $selftest_ok): target/faults*.log, target/faults*/" >&2
    exit 1
  fi
  disk
}

# The simulator against the real tree (docs/sim-vs-real.md): the table's
# simulated runs as they were measured (scripts/sim-table-hashes.sh: a
# change that moves them forces a re-measure); the real-tree scenario's
# short profile simulated, replayed on real processes, simulated again on
# the real run's phases, and compared; fails when the two disagree beyond
# the targets. Then the
# original Go Doorman next to ours (`doorman-faults interop`, on a host of
# the harness's network: the original binds every interface): its Go
# client library and doorman_client against our leaf, mixed trees both
# ways, Σ of unexpired grants sampled every 100 ms for 60 s.
e2e_after_harness() {
  log "simulator: the table of docs/sim-vs-real.md still describes this code"
  ./scripts/sim-table-hashes.sh
  log "simulator against the real tree: real-tree (short), seed 1"
  ./scripts/sim-vs-real.sh --profile short --seeds 1 --out target/sim-vs-real/short
  disk
  log "the original Doorman: interop and mixed trees"
  $SUDO target/release/doorman-faults interop --seconds 60 --out target/interop \
    --original target/original --doorman target/release/doorman --client target/release/doorman-faults
}

# The Python package for the harness's clients, built without its tests.
python_package() {
  log "Python client (built for the harness's clients)"
  DOORMAN_BIN="$PWD/target/release/doorman" PY_CLIENT_BUILD_ONLY=1 ./scripts/python-client-check.sh
}

stage_e2e() {
  need_etcd
  need_netns
  need_original
  build_release
  python_package
  harness_start
  harness_wait
  e2e_after_harness
}

# The server benchmark against the original, short (3 s per point): the
# ratio columns of BENCHMARKS.md re-measured, not copied (figures only;
# nothing asserted on speed).
stage_bench() {
  need_original
  build_release
  log "bench-compare with the original (short)"
  $SUDO env ORIGINAL_BIN="$PWD/target/original" DOORMAN_BIN="$PWD/target/release/doorman" \
    BENCH_FLOOR=0 scripts/bench-compare.sh 3 1
  disk
}

# Everything, arranged for CI's two cores: the harness's schedule (mostly
# waiting) runs in the background while the stages that measure no time
# run beside it at the lowest CPU and I/O priority, so that the trees'
# processes (and etcd's writes) get the machine whenever they want it; the
# tests, which time things, run after it.
run_all() {
  disk
  stage_lint
  need_etcd
  need_envoy
  need_netns
  need_original
  build_release
  python_client
  disk
  harness_start
  NICE="nice -n 19 ionice -c 3"
  log "cargo test --no-run (the debug build of every test)"
  $NICE cargo test --workspace --no-fail-fast --no-run "${CARGO_TEST_ARGS[@]}"
  artefacts_after_python
  NICE=""
  harness_wait
  log "cargo test"
  cargo test --workspace --no-fail-fast "${CARGO_TEST_ARGS[@]}"
  disk
  e2e_after_harness
  stage_bench
}
