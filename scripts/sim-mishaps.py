#!/usr/bin/env python3
"""Re-convergence per kind of mishap, and the dips out of the band, for a
`doorman-sim run --seeds` output directory (docs/simulation.md, "What
limits us"). Reads DIR/seed-N/{timeseries,events}.csv and the scenario's
capacity from DIR/seed-N/nodes.csv (the root's).

Re-convergence of a mishap: seconds from its end (a spike's start, an
outage's end) until Σ client has is within 2 % of min(Σ wants, capacity)
and stays there 60 s, as doorman-sim's summary computes it.

Then the dips by the mishap that started last before them, and what the
longest re-convergence would be if those dips were not there (each row
removes its dips and those of the rows above it): with a mishap every 60 s
and a 60 s hold, any dip also lengthens the mishaps before it.

Usage: scripts/sim-mishaps.py DIR
"""
import bisect
import collections
import csv
import functools
import os
import re
import sys

BAND = 0.02
HOLD = 60
SETTLE = 120  # dips before it are the start-up (`ours`' settle; `original`'s is 60)
ORDER = ["spike", "datacenter cut off", "datacenter master lost", "region cut off",
         "region master lost", "root cut off", "root master lost"]


def capacity(seed_dir):
    with open(os.path.join(seed_dir, "nodes.csv")) as f:
        return max(float(r["capacity"]) for r in csv.DictReader(f) if r["node"] == "root")


def kind(what):
    if "spike" in what:
        return "spike"
    node = what.split(":")[0]
    level = "root" if node == "root" else ("region" if "." not in node else "datacenter")
    return f"{level} {'cut off' if 'unreachable' in what else 'master lost'}"


@functools.lru_cache(maxsize=None)
def load(seed_dir):
    """Per-second (t, Σ has / goal) and the mishaps as (start, end, kind)."""
    cap = capacity(seed_dir)
    with open(os.path.join(seed_dir, "timeseries.csv")) as f:
        rows = list(csv.DictReader(f))
    series = [(int(r["t"]), float(r["clients_has"]) / max(min(float(r["clients_wants"]), cap), 1e-9))
              for r in rows]
    events = []
    with open(os.path.join(seed_dir, "events.csv")) as f:
        for t, what in list(csv.reader(f))[1:]:
            m = re.search(r"for (\d+) s", what)
            events.append((float(t), float(t) + (float(m.group(1)) if m else 0.0), kind(what)))
    return series, events


def dip_runs(series, settle):
    """The dips after settle, as (first index, last index + 1)."""
    runs, first = [], None
    for i, (t, x) in enumerate(series):
        out = t >= settle and abs(x - 1.0) > BAND
        if out and first is None:
            first = i
        elif not out and first is not None:
            runs.append((first, i))
            first = None
    if first is not None:
        runs.append((first, len(series)))
    return runs


def cause(events, t):
    """The kind of the last mishap that started at or before `t`."""
    before = [k for s, _, k in events if s <= t]
    return before[-1] if before else "none"


def settle_times(series, events, inside):
    """Re-convergence of each mishap, as (kind, seconds)."""
    ts = [t for t, _ in series]
    n = len(ts)
    next_out = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        next_out[i] = i if not inside[i] else next_out[i + 1]
    end = ts[-1] + 1 if ts else 0
    marks = []
    for _, start, k in events:
        i = bisect.bisect_left(ts, start)
        took = None
        while i < n:
            if not inside[i]:
                i += 1
                continue
            out = next_out[i]
            if out == n or ts[out] - ts[i] >= HOLD:
                took = ts[i] - start
                break
            i = out + 1
        marks.append((k, max(0.0, end - start if took is None else took)))
    return marks


def seed_figures(seed_dir, settle, ignore=()):
    """Re-convergence per mishap and the dips, each dip as (its ratios, the
    kind of mishap before it); dips after a kind in `ignore` count as in
    the band (what re-convergence would be without them)."""
    series, events = load(seed_dir)
    inside = [abs(x - 1.0) <= BAND for _, x in series]
    dips = []
    for a, b in dip_runs(series, settle):
        k = cause(events, series[a][0])
        dips.append(([x for _, x in series[a:b]], k))
        if k in ignore:
            inside[a:b] = [True] * (b - a)
    return settle_times(series, events, inside), dips


def pct(v, q):
    v = sorted(v)
    return v[int(q * (len(v) - 1))] if v else 0


def main(path):
    seeds = [os.path.join(path, d) for d in sorted(os.listdir(path)) if d.startswith("seed-")]
    per_kind = collections.defaultdict(list)
    dips = []
    for s in seeds:
        marks, d = seed_figures(s, SETTLE)
        for k, took in marks:
            per_kind[k].append(took)
        dips.extend(d)
    every = [x for v in per_kind.values() for x in v]
    print(f"{len(every)} mishaps over {len(seeds)} seeds; {sum(x > 30 for x in every)} take "
          f"longer than 30 s; median {pct(every, 0.5):.0f} s\n")
    print("| mishap | count | > 30 s | p90 | longest |\n|---|---:|---:|---:|---:|")
    for k in ORDER:
        v = per_kind.get(k)
        if v:
            print(f"| {k} | {len(v)} | {sum(x > 30 for x in v)} | {pct(v, 0.9):.0f} s | {max(v):.0f} s |")
    lengths = [len(d) for d, _ in dips]
    lows = [min(d) for d, _ in dips]
    print(f"\nout of the band (after settle): {sum(lengths)} s in {len(dips)} dips over "
          f"{len(seeds)} simulated hours ({sum(lengths) / max(len(seeds), 1):.0f} s per hour); "
          f"median dip {pct(lengths, 0.5)} s, lowest {100 * pct(lows, 0.5):.1f} %; "
          f"90 % last under {pct(lengths, 0.9) + 1} s; longest {max(lengths, default=0)} s, "
          f"deepest {100 * min(lows, default=1):.1f} %")
    what_if(seeds, dips)


def what_if(seeds, dips):
    """The dips by the mishap before them, and the longest re-convergence
    over the seeds if the dips after that kind (and the kinds above it in
    the table) were not there."""
    print("\n| dips after | dips | seconds | longest re-convergence without these and the rows above |")
    print("|---|---:|---:|---:|")
    gone = []
    for k in sorted({c for _, c in dips}, key=lambda c: (-sum(len(d) for d, x in dips if x == c), c)):
        gone.append(k)
        longest = max(t for s in seeds for _, t in seed_figures(s, SETTLE, set(gone))[0])
        mine = [len(d) for d, c in dips if c == k]
        print(f"| {k} | {len(mine)} | {sum(mine)} | {longest:.0f} s |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
