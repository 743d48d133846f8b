#!/usr/bin/env bash
# A whole Doorman deployment on this machine, all on 127.0.0.1:
#   etcd (port 23790), the example config pushed to /doorman/config,
#   a root node of 3 replicas electing a master on /doorman/root,
#   two leaf nodes (leaf-a, leaf-b) of 2 replicas each below it.
#
#   deploy/local-tree.sh start | status | stop
#
# State, pids and logs live in $DOORMAN_TREE_DIR (default /tmp/doorman-local-tree).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR="${DOORMAN_TREE_DIR:-/tmp/doorman-local-tree}"
ETCD_PORT="${ETCD_PORT:-23790}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-23800}"
ETCD="127.0.0.1:${ETCD_PORT}"
BIN="${DOORMAN_BIN:-target/release/doorman}"
CONFIG="deploy/examples/doorman.toml"

# name grpc-port http-port election-key parent
NODES=(
  "root-0 6100 8100 /doorman/root -"
  "root-1 6101 8101 /doorman/root -"
  "root-2 6102 8102 /doorman/root -"
  "leaf-a-0 6110 8110 /doorman/leaf-a root"
  "leaf-a-1 6111 8111 /doorman/leaf-a root"
  "leaf-b-0 6120 8120 /doorman/leaf-b root"
  "leaf-b-1 6121 8121 /doorman/leaf-b root"
)
ROOT_ADDRS="127.0.0.1:6100,127.0.0.1:6101,127.0.0.1:6102"

running() { [ -f "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }

start() {
  command -v etcd >/dev/null || { echo "etcd not found: apt-get install -y etcd-server" >&2; exit 1; }
  if [ ! -x "$BIN" ]; then
    echo "building $BIN"
    cargo build --release --bin doorman
  fi
  mkdir -p "$DIR"
  if running etcd; then
    echo "etcd already running"
  else
    etcd --name local --data-dir "$DIR/etcd" \
      --listen-client-urls "http://$ETCD" --advertise-client-urls "http://$ETCD" \
      --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-cluster "local=http://127.0.0.1:$ETCD_PEER_PORT" \
      >"$DIR/etcd.log" 2>&1 &
    echo $! >"$DIR/etcd.pid"
    for _ in $(seq 1 100); do
      (exec 3<>"/dev/tcp/127.0.0.1/$ETCD_PORT") 2>/dev/null && break
      sleep 0.1
    done
  fi
  "$BIN" config push --etcd "$ETCD" --key /doorman/config "$CONFIG"
  for n in "${NODES[@]}"; do
    read -r name grpc http key parent <<<"$n"
    if running "$name"; then echo "$name already running"; continue; fi
    args=(server --listen "127.0.0.1:$grpc" --http "127.0.0.1:$http" --server-id "127.0.0.1:$grpc"
          --etcd "$ETCD" --election-key "$key" --election-ttl 10)
    if [ "$parent" = "-" ]; then
      args+=(--config etcd:/doorman/config)
    else
      args+=(--parent "$ROOT_ADDRS")
    fi
    DOORMAN_LOG="${DOORMAN_LOG:-info}" "$BIN" "${args[@]}" >"$DIR/$name.log" 2>&1 &
    echo $! >"$DIR/$name.pid"
  done
  sleep 1
  status
  echo
  echo "try: $BIN get --server 127.0.0.1:6110 --resource db/users/1 --wants 10"
  echo "logs: $DIR/*.log   stop: $0 stop"
}

status() {
  if running etcd; then echo "etcd      $ETCD  running (pid $(cat "$DIR/etcd.pid"))"; else echo "etcd      $ETCD  not running"; fi
  for n in "${NODES[@]}"; do
    read -r name grpc http key _ <<<"$n"
    if running "$name"; then
      role=$(curl -s --max-time 1 "http://127.0.0.1:$http/healthz" || echo "no answer")
      printf '%-9s gRPC 127.0.0.1:%s  %-16s %-18s http://127.0.0.1:%s/debug/status\n' "$name" "$grpc" "$key" "$role" "$http"
    else
      printf '%-9s gRPC 127.0.0.1:%s  %-16s not running\n' "$name" "$grpc" "$key"
    fi
  done
}

stop() {
  for n in "${NODES[@]}"; do
    read -r name _ <<<"$n"
    if running "$name"; then kill -TERM "$(cat "$DIR/$name.pid")"; fi
    rm -f "$DIR/$name.pid"
  done
  sleep 0.5
  if running etcd; then kill -TERM "$(cat "$DIR/etcd.pid")"; fi
  rm -f "$DIR/etcd.pid"
  echo "stopped (logs kept in $DIR)"
}

case "${1:-}" in
  start) start ;;
  status) status ;;
  stop) stop ;;
  *) echo "usage: $0 start|status|stop" >&2; exit 2 ;;
esac
