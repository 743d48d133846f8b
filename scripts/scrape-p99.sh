#!/usr/bin/env bash
# GetCapacity latency with and without a /metrics scrape loop, on a server
# holding 100 000 resources (the hardening issue's case). Starts its own
# server on 127.0.0.1, fills it with `doorman loadtest` runs of 10 000
# resources each, then measures `doorman loadtest` (1 000 clients, one
# resource) twice: alone, and while a loop scrapes /metrics back to back.
# Prints the p99s, their ratios and the server's resident memory. Stops everything it started.
#
# Usage: scripts/scrape-p99.sh [RESOURCES (default 100000)] [SECONDS (default 20)]
#                              [CONCURRENCY (default 4)] [SCRAPE_PAUSE (s, default 0)]
# CONCURRENCY is the loadtest's requests in flight: 4 keeps a 2-core machine
# below saturation (latency then shows waiting, not queueing for the CPU);
# 32 saturates it. SCRAPE_PAUSE 0 scrapes back to back.
# RATE=N measures open loop instead: N GetCapacity per second in all, each
# timed from when it was due (`doorman loadtest --rate`), so that a stall
# shows in the percentiles (a closed loop hides it: coordinated omission);
# CONCURRENCY then only bounds the requests in flight.
# SERVER_ARGS adds server flags, e.g.
#   SERVER_ARGS="--metrics-per-resource --metrics-max-resources 100000"
# for one series per resource (the default is one per config template).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
RESOURCES=${1:-100000}
SECONDS_=${2:-20}
CONCURRENCY=${3:-4}
PAUSE=${4:-0}
BIN=target/release/doorman
[ -x "$BIN" ] || cargo build --release --bin doorman
WORK=$(mktemp -d)
GRPC=127.0.0.1:16300
HTTP=127.0.0.1:16380
fair_share_config "*" 1000000 900 60 >"$WORK/config.toml"
"$BIN" server --config "$WORK/config.toml" --listen $GRPC --http $HTTP \
    --min-request-interval 0 ${SERVER_ARGS:-} >"$WORK/server.log" 2>&1 &
SERVER=$!
SCRAPER=""
cleanup() {
    [ -n "$SCRAPER" ] && kill "$SCRAPER" 2>/dev/null || true
    kill "$SERVER" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
for _ in $(seq 50); do curl -sf "http://$HTTP/healthz" >/dev/null && break; sleep 0.1; done

echo "filling $RESOURCES resources"
for ((i = 0; i * 10000 < RESOURCES; i++)); do
    n=$(( RESOURCES - i * 10000 < 10000 ? RESOURCES - i * 10000 : 10000 ))
    "$BIN" loadtest --server $GRPC --clients 1 --concurrency 1 --connections 1 \
        --resources "$n" --resource-prefix "fill$i-" --warmup 0 --duration 0.5 --json >/dev/null
done
curl -sf "http://$HTTP/metrics" | grep -c '^doorman_server_resource_has{' | sed 's/^/resources in \/metrics: /'

load() {
    "$BIN" loadtest --server $GRPC --clients 1000 --concurrency "$CONCURRENCY" --connections 4 \
        --warmup 2 --duration "$SECONDS_" ${RATE:+--rate "$RATE"} --json
}
p99() { python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["latency_us"]["p99"], r["latency_us"]["max"], round(r["rpcs_per_s"]))'; }

rss() { awk -v what="$1" '$1 == what":" {printf "%.0f MB", $2 / 1024}' "/proc/$SERVER/status"; }
read -r BASE BASE_MAX BASE_RPS < <(load | p99)
RSS_BASE=$(rss VmRSS)
# The load while a loop fetches PATH from the server (with SCRAPE_PAUSE
# between): /metrics, and /healthz as the control (the same client on the
# same cores, but a page that costs the server nothing). With no pause one
# curl fetches the page over and over on one connection, as a scraper
# does; a new curl per fetch would measure process start-up, which on 2
# cores costs an open-loop p99 as much as the page does.
during() {
    if [ "$PAUSE" = 0 ]; then
        curl -sf "http://$HTTP$1?scrape=[1-10000000]" >/dev/null &
    else
        (while true; do curl -sf -o /dev/null "http://$HTTP$1"; sleep "$PAUSE"; done) &
    fi
    SCRAPER=$!
    load | p99
    kill "$SCRAPER"; SCRAPER=""
}
read -r SCRAPE SCRAPE_MAX SCRAPE_RPS < <(during /metrics)
read -r CTRL CTRL_MAX CTRL_RPS < <(during /healthz)
echo "loadtest: 1000 clients, concurrency $CONCURRENCY, ${RATE:+open loop at $RATE/s, }${SECONDS_} s; scrape pause ${PAUSE} s"
echo "without scrapes: p99 ${BASE} us, max ${BASE_MAX} us, ${BASE_RPS} RPC/s"
echo "scraping /metrics back to back: p99 ${SCRAPE} us, max ${SCRAPE_MAX} us, ${SCRAPE_RPS} RPC/s"
echo "fetching /healthz the same way: p99 ${CTRL} us, max ${CTRL_MAX} us, ${CTRL_RPS} RPC/s"
echo "server memory: ${RSS_BASE} resident before the scrapes, $(rss VmRSS) after, peak $(rss VmHWM)"
python3 -c "print(f'p99 ratio (scraping / not): {${SCRAPE}/${BASE}:.2f}; (/healthz loop / not): {${CTRL}/${BASE}:.2f}')"
