# Sourced by the benchmark scripts (bench-compare, bench-instructions,
# bench-rls, bench-server, profile-server, scrape-p99): a claimed port on
# 127.0.0.1 (checklib/ports.sh), waiting for a server to listen on one, the config of one
# FAIR_SHARE template without learning mode that they load, and where the
# no-op floor's executable is.

# claim_port NAME: a port on 127.0.0.1 claimed for this shell's life, as
# every test and check claims them.
# shellcheck source=checklib/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/checklib/ports.sh"

# listening PORT SECONDS: true once something accepts on 127.0.0.1:PORT,
# false if nothing has within SECONDS (checked every 50 ms).
listening() {
    local tries=$(($2 * 20))
    for _ in $(seq 1 "$tries"); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# fair_share_config GLOB CAPACITY LEASE_LENGTH REFRESH_INTERVAL: the config
# on stdout.
fair_share_config() {
    cat <<TOML
[[resources]]
identifier_glob = "$1"
capacity = $2
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = $3
refresh_interval = $4
learning_mode_duration = 0
TOML
}

# The no-op floor's release executable (crates/doorman-server/benches/
# noop_floor.rs), built if needed; its path on stdout.
floor_exe() {
    cargo bench -p doorman-server --bench noop_floor --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "noop_floor" and m.get("executable"):
        print(m["executable"])'
}
