#!/usr/bin/env bash
# The one test command: installs what the tests need if it is missing, then
# checks formatting and lints and runs every test of the workspace.
#
#   ./scripts/test.sh            # everything
#   ./scripts/test.sh -p doorman-server   # extra args go to `cargo test`
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 1
fi

# protoc is not needed: build scripts use the vendored binary through
# tools/protoc (see .cargo/config.toml).

# The election and config-push tests run a real etcd (3.4+). Those tests fail
# with an explanation if it is missing; install it here so they can run.
if ! command -v etcd >/dev/null 2>&1 && [ ! -x /usr/bin/etcd ] && [ -z "${ETCD_BIN:-}" ]; then
  log "installing etcd-server (needed by the election and config-push tests)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq etcd-server >/dev/null
fi

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

log "no module cycles"
python3 scripts/module-cycles.py crates/*/src simulations/src

log "cargo test"
cargo test --workspace "$@"
