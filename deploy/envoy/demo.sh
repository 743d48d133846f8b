#!/usr/bin/env bash
# A Doorman server behind a real Envoy, with a load loop and a one-line
# result: `deploy/envoy/demo.sh [rls|rlqs] [SECONDS]`.
#
# Starts `doorman server` (capacity 20 requests/s for every resource in the
# domain `edge`) and Envoy 1.40 with deploy/envoy/<protocol>.yaml, all on
# 127.0.0.1; offers 60 requests/s through Envoy (warm-up, then SECONDS
# measured, default 20) and prints how many Envoy admitted. Stops both (by
# pid) at the end. Envoy comes from scripts/envoy-setup.sh (a venv under
# target/); the doorman binary is target/release/doorman (built if missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
PROTOCOL=${1:-rls}
SECONDS_=${2:-20}
case "$PROTOCOL" in rls|rlqs) ;; *) echo "usage: $0 [rls|rlqs] [SECONDS]" >&2; exit 2 ;; esac
ENVOY=$(./scripts/envoy-setup.sh | tail -1)
BIN=target/release/doorman
[ -x "$BIN" ] || cargo build --release --bin doorman

# shellcheck source=../../scripts/checklib/ports.sh
. scripts/checklib/ports.sh
WORK=$(mktemp -d)
for p in GRPC HTTP LISTEN BACKEND ADMIN; do claim_port "$p"; done
cat >"$WORK/doorman.toml" <<'TOML'
[[resources]]
identifier_glob = "edge/*"
capacity = 20
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 2
learning_mode_duration = 0
TOML
sed -e "s/\${LISTEN_PORT}/$LISTEN/g; s/\${BACKEND_PORT}/$BACKEND/g" \
    -e "s/\${ADMIN_PORT}/$ADMIN/g; s/\${DOORMAN_PORT}/$GRPC/g" \
    "deploy/envoy/$PROTOCOL.yaml" >"$WORK/envoy.yaml"
if ! out=$("$ENVOY" --mode validate -c "$WORK/envoy.yaml" 2>&1); then
    echo "$out" >&2
    exit 1
fi

"$BIN" server --config "$WORK/doorman.toml" --listen "127.0.0.1:$GRPC" \
    --http "127.0.0.1:$HTTP" >"$WORK/doorman.log" 2>&1 &
DOORMAN=$!
"$ENVOY" -c "$WORK/envoy.yaml" --disable-hot-restart --concurrency 1 -l warning \
    >"$WORK/envoy.log" 2>&1 &
ENVOY_PID=$!
cleanup() {
    kill "$ENVOY_PID" "$DOORMAN" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$ADMIN/ready" >/dev/null 2>&1 && break
    sleep 0.1
done

python3 - "$LISTEN" "$SECONDS_" "$PROTOCOL" <<'PY'
import sys, threading, time, urllib.error, urllib.request
port, secs, protocol = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
RATE, CAPACITY = 60.0, 20.0

def offer(seconds):
    counts = {"ok": 0, "limited": 0, "other": 0}
    lock = threading.Lock()
    total = int(RATE * seconds)
    start = time.time()
    def worker(k):
        for i in range(k, total, 8):
            time.sleep(max(0.0, start + i / RATE - time.time()))
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
                key = "ok"
            except urllib.error.HTTPError as e:
                key = "limited" if e.code == 429 else "other"
            except OSError:
                key = "other"
            with lock:
                counts[key] += 1
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    return counts, max(seconds, time.time() - start)

offer(12.0 if protocol == "rlqs" else 5.0)  # warm-up: the demand becomes known
counts, took = offer(secs)
rate = counts["ok"] / took
print(f"{protocol}: offered {RATE:.0f}/s through Envoy for {took:.0f} s; "
      f"admitted {rate:.1f}/s of a capacity of {CAPACITY:.0f}/s ({rate / CAPACITY * 100:.0f} %), "
      f"{counts['limited']} answered 429, {counts['other']} other")
PY
