# Sourced by the shell scripts that start servers on 127.0.0.1 (the
# benchmarks through bench-lib.sh, deploy/envoy/demo.sh): ports claimed as
# the test kit and scripts/checklib/ports.py claim them (an flock on
# <dir>/<port>.lock, dir $DOORMAN_TEST_PORTS or /tmp/doorman-test-ports),
# held by the sourcing shell until it exits, so no test or check running
# beside it is given the same port.
#
# Must not: be called in a subshell ($(...)): the claim would end with it.

CHECKLIB_PORTS_PY="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ports.py"

# claim_port NAME: sets the variable NAME to a claimed port, or fails.
# ports.py picks a port nothing listens on and no one holds; this shell
# then takes the same lock (a neighbour that got it in between wins, and
# the next candidate is tried).
claim_port() {
    local _cp_port _cp_fd _cp_dir=${DOORMAN_TEST_PORTS:-/tmp/doorman-test-ports}
    for _ in $(seq 1 20); do
        _cp_port=$(python3 "$CHECKLIB_PORTS_PY") || return 1
        exec {_cp_fd}>>"$_cp_dir/$_cp_port.lock" || continue
        if flock -n "$_cp_fd"; then
            printf -v "$1" "%s" "$_cp_port"
            return 0
        fi
        exec {_cp_fd}>&-
    done
    echo "claim_port: no port claimed in 20 tries (claims in $_cp_dir)" >&2
    return 1
}
