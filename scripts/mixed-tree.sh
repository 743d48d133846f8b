#!/usr/bin/env bash
# Mixed trees with the original Go Doorman (youtube/doorman), run for real:
#   A. our intermediate under an original root;
#   B. an original intermediate under our root.
# In each, two clients sit behind an intermediate and two on the other
# side (A: Go clients on the original root; B: our clients on our leaf), all
# wanting 80 of resource `res` (FAIR_SHARE, capacity 100). As the config
# says, each of the four must end up with 25.
#
# Needs the original binaries, built from youtube/doorman (not part of this
# repository): ORIGINAL_BIN=DIR with `doorman`, `doorman_shell` and, for B,
# `doorman_insecure_parent`: the original server with `grpc.WithInsecure()`
# added to its parent dial options (doorman_server.go:165), without which
# the original cannot start an intermediate at all ("grpc: no transport
# security set"). The original binds all interfaces, so everything runs
# in a private network namespace (`unshare -n`, needs root).
#
# Usage: ORIGINAL_BIN=/path/to/bin scripts/mixed-tree.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${ORIGINAL_BIN:?set ORIGINAL_BIN to the directory of the original Doorman binaries}"
for b in doorman doorman_shell doorman_insecure_parent; do
    [ -x "$ORIGINAL_BIN/$b" ] || { echo "missing $ORIGINAL_BIN/$b" >&2; exit 2; }
done
if [ "${MIXED_TREE_IN_NS:-}" != 1 ]; then
    cargo build --release --bin doorman
    exec unshare -n env MIXED_TREE_IN_NS=1 "$0" "$@"
fi
ip link set lo up
OURS=$PWD/target/release/doorman
WORK=$(mktemp -d)
PIDS=()
stop() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap 'stop; rm -rf "$WORK"' EXIT

# The original refuses a config without a "*" entry.
cat >"$WORK/root.yml" <<'YAML'
resources:
  - identifier_glob: res
    capacity: 100
    algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
  - identifier_glob: "*"
    capacity: 0
    algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
YAML
cat >"$WORK/inter.yml" <<'YAML'
resources:
  - identifier_glob: "*"
    capacity: 0
    algorithm: {kind: FAIR_SHARE, lease_length: 20, refresh_interval: 5, learning_mode_duration: 0}
YAML
cat >"$WORK/root.toml" <<'TOML'
[[resources]]
identifier_glob = "res"
capacity = 100
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 5
learning_mode_duration = 0
TOML

# Go clients: `get` each, wait, `show` the leases; prints "client capacity".
go_clients() { # SERVER SECONDS CLIENT...
    local server=$1 secs=$2; shift 2
    { for c in "$@"; do echo "get $c res 80"; done; sleep "$secs"; echo show; sleep 1; echo q; } |
        timeout $((secs + 15)) "$ORIGINAL_BIN/doorman_shell" -server="$server" 2>/dev/null |
        awk '/^client:/ {gsub(/"/, "", $2); c=$2} /^capacity:/ {print c, $2}'
}
# Our clients: refresh every 4 s like a real client (sending `has`), print
# the last lease's capacity.
our_client() { # SERVER SECONDS ID
    local has=0 out t
    for ((t = 0; t < $2; t += 4)); do
        out=$("$OURS" get --server "$1" --resource res --wants 80 --client-id "$3" --has "$has" --json) || true
        has=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1] or "{}").get("capacity", 0))' "$out")
        sleep 4
    done
    echo "$3 $has"
}
check() { # NAME RESULTS
    echo "$2" | sed "s/^/  $1: /"
    python3 - "$2" <<'PY'
import sys
caps = [float(l.split()[1]) for l in sys.argv[1].strip().splitlines()]
ok = len(caps) == 4 and all(abs(c - 25) < 0.01 for c in caps) and sum(caps) <= 100.0001
print(f"  sum {sum(caps):.2f} of 100 -> {'OK' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
}
SECS=45
echo "A. our intermediate under an original root"
"$ORIGINAL_BIN/doorman" -config="file:$WORK/root.yml" -port=15100 -debug_port=15180 \
    -hostname=127.0.0.1 -logtostderr >"$WORK/a-root.log" 2>&1 & PIDS+=($!)
sleep 1
"$OURS" server --parent 127.0.0.1:15100 --listen 127.0.0.1:16101 >"$WORK/a-inter.log" 2>&1 & PIDS+=($!)
sleep 1
A=$( { go_clients 127.0.0.1:15100 $SECS go1 go2 & our_client 127.0.0.1:16101 $SECS ours1 &
       our_client 127.0.0.1:16101 $SECS ours2 & wait; } )
stop; PIDS=()
check A "$A" || FAILED=1

echo "B. an original intermediate under our root"
"$OURS" server --config "$WORK/root.toml" --listen 127.0.0.1:16100 >"$WORK/b-root.log" 2>&1 & PIDS+=($!)
sleep 1
"$ORIGINAL_BIN/doorman_insecure_parent" -config="file:$WORK/inter.yml" -port=15101 \
    -debug_port=15181 -parent=127.0.0.1:16100 -hostname=127.0.0.1 -logtostderr \
    >"$WORK/b-inter.log" 2>&1 & PIDS+=($!)
"$OURS" server --parent 127.0.0.1:16100 --listen 127.0.0.1:16102 >"$WORK/b-leaf.log" 2>&1 & PIDS+=($!)
sleep 1
B=$( { go_clients 127.0.0.1:15101 $SECS go1 go2 & our_client 127.0.0.1:16102 $SECS ours1 &
       our_client 127.0.0.1:16102 $SECS ours2 & wait; } )
check B "$B" || FAILED=1
exit "${FAILED:-0}"
