#!/bin/sh
# Build the original Go Doorman (youtube/doorman, Apache-2.0) into OUT
# (default target/original), cached: nothing is rebuilt when OUT has every
# binary. From its source folder ORIGINAL_DOORMAN (default
# ../shared/original-doorman: the source tarball and build.sh, which
# builds doorman, doorman_client, doorman_shell and goclient with Debian's
# Go in about a minute).
#
# One more binary is built here: doorman_insecure_parent, the original
# server with grpc.WithInsecure() added to the options it dials its parent
# with (go/cmd/doorman/doorman_server.go, the connection.DialOpts of
# doorman.New). Without it the original cannot run as an intermediate at
# all: its parent dial has no transport security option and gRPC refuses
# it ("grpc: no transport security set"). The mixed-tree test needs an
# original intermediate, so it uses this build; nothing else changes.
set -eu
cd "$(dirname "$0")/.."
ORIGINAL=${ORIGINAL_DOORMAN:-../shared/original-doorman}
OUT=${1:-$PWD/target/original}
have=1
for b in doorman doorman_client doorman_shell goclient doorman_insecure_parent; do
  [ -x "$OUT/$b" ] || have=0
done
[ "$have" = 1 ] && exit 0
if [ ! -f "$ORIGINAL/build.sh" ]; then
  echo "the original Doorman's source is not at $ORIGINAL (set ORIGINAL_DOORMAN to its folder: build.sh and the youtube-doorman tarball)" >&2
  exit 1
fi
echo "==> building the original Doorman into $OUT" >&2
sh "$ORIGINAL/build.sh" "$OUT" >&2
WORK=$(mktemp -d /tmp/original-insecure.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
SRC=$WORK/gopath/src/github.com/youtube/doorman
mkdir -p "$SRC"
tar -xzf "$ORIGINAL"/youtube-doorman-*.tar.gz -C "$SRC"
rm -rf "$SRC/vendor/github.com/ghodss" "$SRC/vendor/github.com/cloudfoundry-incubator"
f=$SRC/go/cmd/doorman/doorman_server.go
sed -i 's/rpc\.WithTimeout(\*rpcDialTimeout)))/rpc.WithTimeout(*rpcDialTimeout), rpc.WithInsecure()))/' "$f"
grep -q 'rpc.WithInsecure()))' "$f" || { echo "cannot patch the parent dial options in $f" >&2; exit 1; }
cd "$SRC"
GOPATH=$WORK/gopath:/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE=$WORK/cache \
  go build -p 2 -o "$OUT/doorman_insecure_parent" ./go/cmd/doorman
ls -l "$OUT" >&2
