#!/usr/bin/env bash
# Build the container image from the release binary built on the host, with
# podman, and run it (scripts/image-check.py):
#
#   ./scripts/image.sh            # builds target/release/doorman (a no-op when fresh)
#   IMAGE=doorman:dev ./scripts/image.sh
#
# No container registry is reachable from this project's machines, so the
# base `debian:bookworm-slim` is made locally from Debian's archive by
# PODMAN_ENV (default ../shared/tools/container/podman-env.sh: installs
# podman, runc and mmdebstrap, and keeps podman's storage under
# target/podman). The build uses deploy/Dockerfile's target
# `runtime-from-host` with a context of the stripped binary alone.
# Prints the image's name on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '==> %s\n' "$*" >&2; }

PODMAN_ENV=${PODMAN_ENV:-../shared/tools/container/podman-env.sh}
if [ ! -f "$PODMAN_ENV" ]; then
  echo "no podman set-up script at $PODMAN_ENV (set PODMAN_ENV)" >&2
  exit 1
fi
eval "$(sh "$PODMAN_ENV" "$PWD/target/podman")"

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
IMAGE=${IMAGE:-localhost/doorman:$version}
log "cargo build --release --bin doorman"
cargo build --release --quiet --bin doorman
mkdir -p target/image
strip -o target/image/doorman target/release/doorman
log "podman build $IMAGE (target runtime-from-host, binary $(du -h target/image/doorman | cut -f1))"
podman build --quiet --pull=never --network host -f deploy/Dockerfile \
  --target runtime-from-host --build-arg VERSION="$version" \
  --build-arg REVISION="$(git rev-parse HEAD 2>/dev/null || true)" \
  -t "$IMAGE" target/image >&2
log "running the image"
python3 scripts/image-check.py "$IMAGE" >&2
echo "$IMAGE"
