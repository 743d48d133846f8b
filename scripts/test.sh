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

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

log "cargo test"
cargo test --workspace "$@"
