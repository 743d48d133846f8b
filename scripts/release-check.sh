#!/usr/bin/env bash
# The release as a user would get it: one version everywhere, and the Rust
# crates a user depends on (doorman-client and what it needs) packaged and
# built from their packages as crates.io would (`cargo publish --dry-run`).
# The Python wheel is checked by scripts/python-client-check.sh (built,
# installed without a Rust toolchain, tested, its version this one); the
# image's label by scripts/image-check.py (`doorman --version` in it).
#
#   ./scripts/release-check.sh            # DOORMAN_BIN: the doorman binary (default target/release/doorman)
#
# Checks, each failing the run:
#   * the workspace version (Cargo.toml [workspace.package]) is the
#     version of every published crate's entry in [workspace.dependencies],
#     what `doorman --version` prints, and CHANGELOG.md's latest release;
#   * every workspace crate not in PUBLISHED says `publish = false`;
#   * `cargo publish --dry-run` of PUBLISHED packages each crate (its
#     metadata complete, its files inside it) and builds them together
#     from the packages, against crates.io's index.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'release-check: %s\n' "$*" >&2; exit 1; }

PUBLISHED=(doorman-lease doorman-algorithms doorman-core doorman-proto doorman-net doorman-client)

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$version" ] || die "no version in Cargo.toml's [workspace.package]"

for c in "${PUBLISHED[@]}"; do
  line=$(grep -E "^$c = " Cargo.toml) || die "$c is not in Cargo.toml's [workspace.dependencies]"
  case "$line" in
    *"version = \"$version\""*) ;;
    *) die "Cargo.toml: $c's entry must carry version = \"$version\" (the workspace version): $line" ;;
  esac
done

DOORMAN_BIN=${DOORMAN_BIN:-target/release/doorman}
[ -x "$DOORMAN_BIN" ] || die "DOORMAN_BIN=$DOORMAN_BIN is not an executable file (cargo build --release --bin doorman)"
said=$("$DOORMAN_BIN" --version)
[ "$said" = "doorman $version" ] || die "$DOORMAN_BIN --version says '$said', the workspace is $version"

latest=$(sed -n 's/^## \[\([0-9][^]]*\)\].*/\1/p' CHANGELOG.md | head -1)
[ "$latest" = "$version" ] \
  || die "CHANGELOG.md's latest release is '${latest:-none}', the workspace is $version: add its section"

for manifest in crates/*/Cargo.toml simulations/Cargo.toml clients/python/Cargo.toml; do
  name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -1)
  if [[ " ${PUBLISHED[*]} " == *" $name "* ]]; then
    ! grep -q '^publish = false' "$manifest" || die "$manifest: $name is published but says publish = false"
  else
    grep -q '^publish = false' "$manifest" || die "$manifest: $name is not published (not in PUBLISHED) and must say publish = false"
  fi
done
log "one version: workspace $version = published crates' entries = $said = CHANGELOG.md"

args=()
for c in "${PUBLISHED[@]}"; do args+=(-p "$c"); done
log "cargo publish --dry-run ${args[*]}"
# --allow-dirty: what is checked is the packages, not whether this
# checkout has uncommitted files (earlier stages write some).
cargo publish --dry-run --allow-dirty --quiet "${args[@]}" \
  || die "cargo publish --dry-run failed (above)"
log "the published crates package and build from their packages"
