#!/usr/bin/env bash
# The Python client (clients/python): builds the doorman_client wheel (what
# `pip install` gets: no Rust toolchain needed to install it), installs it
# into a fresh venv under the target directory with nothing but the wheel
# and the test tools, and runs its pytest suite there against real
# `doorman server` processes (started by the tests on 127.0.0.1), with no
# cargo or rustc on the PATH.
#
#   ./scripts/python-client-check.sh              # after cargo test, or from a clean clone
#   ./scripts/python-client-check.sh -k gauge     # extra args go to pytest
#
# Environment:
#   DOORMAN_BIN         the server binary (default $TARGET/debug/doorman; built
#                       with `cargo build --bin doorman` if missing and unset)
#   CARGO_TARGET_DIR    the target directory to build in (default target/,
#                       so the dependencies already built are reused)
#   PYTHON              the interpreter the venvs are made from (default
#                       python3; 3.9 or newer)
#   PY_CLIENT_BUILD_ONLY=1  build the wheel and install it into the build
#                       venv, run nothing (the fault harness's Python
#                       clients need only that)
#
# The build venv ($TARGET/venv-python) gets pinned maturin, pytest,
# pytest-timeout and mypy from PyPI the first time; later runs reuse it.
# mypy's stubtest checks the type stubs against the built module. The
# wheel goes to $TARGET/wheels; the test venv ($TARGET/venv-wheel) is made
# anew each run. The wheel's version must be the workspace's and
# `doorman --version`'s (one version for the release: CHANGELOG.md).
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

log "building the doorman_client wheel (maturin build --release)"
# maturin builds in CARGO_TARGET_DIR, exported here so both agree on $TARGET.
rm -rf "$TARGET/wheels"
CARGO_TARGET_DIR=$TARGET "$VENV/bin/maturin" build --quiet --release \
    --manifest-path clients/python/Cargo.toml --out "$TARGET/wheels" \
  || die "maturin could not build clients/python (see the errors above)"
wheels=("$TARGET"/wheels/doorman_client-*.whl)
[ "${#wheels[@]}" = 1 ] && [ -f "${wheels[0]}" ] || die "expected one wheel in $TARGET/wheels, found: ${wheels[*]}"
WHEEL=${wheels[0]}
log "wheel: $(basename "$WHEEL")"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$WHEEL" \
  || die "cannot install $WHEEL into $VENV"

if [ "${PY_CLIENT_BUILD_ONLY:-0}" = 1 ]; then exit 0; fi

log "stubtest: the type stubs match the module"
MYPY_CACHE_DIR=$TARGET/mypy-cache "$VENV/bin/python" -m mypy.stubtest doorman_client \
  || die "clients/python/python/doorman_client/_native.pyi does not match the built module (above)"

# The test venv: the wheel and the test tools only, made with no Rust
# toolchain on the PATH (as a user without one would install it).
CLEAN_PATH=/usr/local/bin:/usr/bin:/bin
if PATH=$CLEAN_PATH command -v cargo >/dev/null 2>&1 || PATH=$CLEAN_PATH command -v rustc >/dev/null 2>&1; then
  die "cargo or rustc is on $CLEAN_PATH: the wheel's install could not show it needs no Rust toolchain"
fi
WVENV=$TARGET/venv-wheel
rm -rf "$WVENV"
# The interpreter itself, not a shim of the build venv or of the PATH.
PY=$("$(command -v "$PYTHON")" -c 'import os, sys; print(os.path.realpath(sys.executable))')
# A clean environment: an empty HOME (no ~/.cargo, no user pip config),
# the clean PATH, and only what pip needs to reach an index (proxies,
# CA files, PIP_* settings) passed on.
rm -rf "$TARGET"/wheel-home.*
WHOME=$(mktemp -d "$TARGET/wheel-home.XXXXXX")
CLEAN_ENV=(env -i "HOME=$WHOME" "PATH=$CLEAN_PATH" LANG=C.UTF-8)
while IFS= read -r kept; do CLEAN_ENV+=("$kept"); done < <(
  env | grep -E '^(PIP_[A-Z_]+|SSL_CERT_(FILE|DIR)|REQUESTS_CA_BUNDLE|(https?|no)_proxy|(HTTPS?|NO)_PROXY)=' || true)
"${CLEAN_ENV[@]}" "$PY" -m venv "$WVENV" || die "cannot create $WVENV"
# Binary wheels only: nothing is built from source on the way, so the
# install cannot quietly need a compiler.
# shellcheck disable=SC2086 # the pins are a list of requirements
"${CLEAN_ENV[@]}" "$WVENV/bin/python" -m pip install -q --disable-pip-version-check \
    --only-binary :all: "$WHEEL" pytest==$PYTEST_VERSION pytest-timeout==$PYTEST_TIMEOUT_VERSION \
  || die "cannot install $(basename "$WHEEL") (binary wheels only, without a Rust toolchain) and the test tools into $WVENV"

workspace=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
installed=$("${CLEAN_ENV[@]}" "$WVENV/bin/python" -c \
  'import importlib.metadata as m, doorman_client as d; assert m.version("doorman-client") == d.__version__, (m.version("doorman-client"), d.__version__); print(d.__version__)') \
  || die "the installed wheel's metadata and doorman_client.__version__ disagree (above)"
server=$("$DOORMAN_BIN" --version)
[ "$installed" = "$workspace" ] && [ "$server" = "doorman $workspace" ] \
  || die "versions differ: wheel $installed, workspace $workspace, $DOORMAN_BIN --version: $server"
log "versions agree: wheel $installed = workspace = $server"

log "pytest clients/python/tests against the installed wheel (server: $DOORMAN_BIN)"
cd clients/python
where=$("${CLEAN_ENV[@]}" "$WVENV/bin/python" -c 'import doorman_client; print(doorman_client.__file__)')
case "$where" in
  "$WVENV"/*) ;;
  *) die "the tests would import doorman_client from $where, not from the wheel in $WVENV" ;;
esac
exec "${CLEAN_ENV[@]}" "PATH=$WVENV/bin:$CLEAN_PATH" "DOORMAN_BIN=$DOORMAN_BIN" \
  "$WVENV/bin/python" -m pytest -p no:cacheprovider "$@"
