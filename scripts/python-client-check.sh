#!/usr/bin/env bash
# The Python client (clients/python): builds the doorman_client package
# into a venv under the target directory and runs its pytest suite against
# real `doorman server` processes (started by the tests on 127.0.0.1).
#
#   ./scripts/python-client-check.sh              # after cargo test, or from a clean clone
#   ./scripts/python-client-check.sh -k gauge     # extra args go to pytest
#
# Environment:
#   DOORMAN_BIN         the server binary (default $TARGET/debug/doorman; built
#                       with `cargo build --bin doorman` if missing and unset)
#   CARGO_TARGET_DIR    the target directory to build in (default target/,
#                       so the dependencies `cargo test` built are reused)
#   PYTHON              the interpreter the venv is made from (default
#                       python3; 3.9 or newer)
#   PY_CLIENT_RELEASE=1 build the extension with --release (default: the
#                       dev profile, as `cargo test` builds)
#   PY_CLIENT_BUILD_ONLY=1  build and install the package, run nothing
#                       (the fault harness's Python clients need only it)
#
# The venv ($TARGET/venv-python) gets pinned maturin, pytest,
# pytest-timeout and mypy from PyPI the first time; later runs reuse it.
# mypy's stubtest checks the type stubs against the built module.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'python-client-check: %s\n' "$*" >&2; exit 1; }

MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.2.0
PYTEST_TIMEOUT_VERSION=2.4.0
MYPY_VERSION=2.4.1

command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust (https://rustup.rs) first"
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found: install Python 3.9 or newer (or set PYTHON)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 9))' \
  || die "$("$PYTHON" --version 2>&1) is too old: doorman_client needs Python 3.9 or newer"

TARGET=${CARGO_TARGET_DIR:-target}
mkdir -p "$TARGET"
TARGET=$(cd "$TARGET" && pwd)
VENV=$TARGET/venv-python
PINS="maturin==$MATURIN_VERSION pytest==$PYTEST_VERSION pytest-timeout==$PYTEST_TIMEOUT_VERSION mypy==$MYPY_VERSION"

if [ ! -f "$VENV/.pins" ] || [ "$(cat "$VENV/.pins")" != "$PINS" ]; then
  log "creating $VENV with $PINS"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV" \
    || die "cannot create a venv with $PYTHON (on Debian/Ubuntu: apt-get install python3-venv)"
  # shellcheck disable=SC2086 # PINS is a list of requirements
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check $PINS \
    || die "cannot install $PINS from PyPI into $VENV"
  echo "$PINS" >"$VENV/.pins"
fi

if [ -z "${DOORMAN_BIN:-}" ]; then
  DOORMAN_BIN=$TARGET/debug/doorman
  if [ ! -x "$DOORMAN_BIN" ]; then
    log "building the server binary (cargo build --bin doorman)"
    cargo build --quiet --bin doorman
  fi
fi
[ -x "$DOORMAN_BIN" ] || die "DOORMAN_BIN=$DOORMAN_BIN is not an executable file"
DOORMAN_BIN=$(cd "$(dirname "$DOORMAN_BIN")" && pwd)/$(basename "$DOORMAN_BIN")
export DOORMAN_BIN

profile=()
if [ "${PY_CLIENT_RELEASE:-0}" = 1 ]; then profile=(--release); fi
log "building doorman_client into $VENV (maturin develop ${profile[*]:-})"
# maturin installs into the venv named by VIRTUAL_ENV; it builds in
# CARGO_TARGET_DIR, exported here so both agree on $TARGET.
VIRTUAL_ENV=$VENV CARGO_TARGET_DIR=$TARGET "$VENV/bin/maturin" develop --quiet \
    "${profile[@]}" --manifest-path clients/python/Cargo.toml \
  || die "maturin could not build clients/python (see the errors above)"

if [ "${PY_CLIENT_BUILD_ONLY:-0}" = 1 ]; then exit 0; fi

log "stubtest: the type stubs match the module"
MYPY_CACHE_DIR=$TARGET/mypy-cache "$VENV/bin/python" -m mypy.stubtest doorman_client \
  || die "clients/python/python/doorman_client/_native.pyi does not match the built module (above)"

log "pytest clients/python/tests (server: $DOORMAN_BIN)"
cd clients/python
exec "$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
