#!/usr/bin/env python3
"""Where a server's CPU per request goes, floor beside ours.

Reads `perf report --no-children --sort symbol --stdio` of two servers (the
no-op floor and ours, profiled under the same load in one run by
scripts/profile-server.sh) and each one's server CPU per RPC (µs, from
`doorman loadtest --server-pid`). Turns every symbol's share into µs per RPC
and prints, in µs per RPC: the layers (HTTP/2, protobuf, tonic/tower, tokio,
our core, our shell, metrics, tracing, allocation, memcpy, kernel, other)
for both and their difference, then the symbols that cost ours the most
more than the floor.

Usage: profile-layers.py FLOOR_REPORT FLOOR_US OURS_REPORT OURS_US
"""
import re
import sys

LAYERS = [
    ("kernel (syscalls, TCP, scheduling)", r"^\[k\]"),
    ("allocation (malloc, free)", r"malloc|free|realloc|calloc|_int_|alloc::|cfree|tcache|arena"),
    ("HTTP/2 (h2, hyper)", r"\bh2::|hyper::|hpack"),
    ("protobuf (prost)", r"prost::|doorman_proto::|encode|decode"),
    ("tonic / tower", r"tonic::|tower::|tower_http::|http_body|axum::"),
    ("tokio", r"tokio::|mio::|parking|futex"),
    ("core (doorman_core, algorithms)", r"doorman_core::|doorman_algorithms::|indexmap::|hashbrown::"),
    ("our shell (doorman_server)", r"doorman_server::|noop_floor::"),
    ("metrics", r"prometheus|metrics::"),
    ("tracing", r"tracing"),
    ("memcpy / memmove", r"memcpy|memmove|memset|memcmp"),
]


def symbols(path, us_per_rpc):
    """{symbol: µs per RPC} from a perf report."""
    out = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"\s*([\d.]+)%\s+(\[.\])\s+(.*)", line)
        if m:
            # perf pads the symbol column and may append empty columns
            # ("-      -"), padded differently per report.
            sym = re.sub(r"(\s+-)+\s*$", "", m.group(3)).strip()
            key = m.group(2) + " " + sym
            out[key] = out.get(key, 0.0) + float(m.group(1)) / 100 * us_per_rpc
    return out


def layer(sym):
    for name, rx in LAYERS:
        if re.search(rx, sym):
            return name
    return "other (std, bytes, unsymbolised)"


def by_layer(syms):
    out = {}
    for s, us in syms.items():
        out[layer(s)] = out.get(layer(s), 0.0) + us
    return out


def main():
    floor = symbols(sys.argv[1], float(sys.argv[2]))
    ours = symbols(sys.argv[3], float(sys.argv[4]))
    lf, lo = by_layer(floor), by_layer(ours)
    names = sorted(set(lf) | set(lo), key=lambda n: -(lo.get(n, 0) - lf.get(n, 0)))
    print("| layer | floor µs/RPC | ours µs/RPC | ours − floor |")
    print("|---|---:|---:|---:|")
    for n in names:
        f, o = lf.get(n, 0.0), lo.get(n, 0.0)
        print(f"| {n} | {f:.2f} | {o:.2f} | {o - f:+.2f} |")
    f, o = sum(lf.values()), sum(lo.values())
    print(f"| **all** | **{f:.2f}** | **{o:.2f}** | **{o - f:+.2f}** |")
    print()
    print("symbols costing ours the most more than the floor (µs per RPC):")
    diff = sorted(set(floor) | set(ours), key=lambda s: -(ours.get(s, 0) - floor.get(s, 0)))
    for s in diff[:25]:
        f, o = floor.get(s, 0.0), ours.get(s, 0.0)
        print(f"  {o - f:+6.2f}  (floor {f:5.2f}, ours {o:5.2f})  {s[:110]}")


if __name__ == "__main__":
    main()
