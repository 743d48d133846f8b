#!/usr/bin/env python3
"""Re-convergence per kind of mishap, and the dips out of the band, for a
`doorman-sim run --seeds` output directory (docs/simulation.md, "What
limits us"). Reads DIR/seed-N/{timeseries,events}.csv and the scenario's
capacity from DIR/seed-N/nodes.csv (the root's).

Re-convergence of a mishap: seconds from its end (a spike's start, an
outage's end) until Σ client has is within 2 % of min(Σ wants, capacity)
and stays there 60 s, as doorman-sim's summary computes it.

Usage: scripts/sim-mishaps.py DIR
"""
import collections
import csv
import os
import re
import sys

BAND = 0.02
HOLD = 60
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


def seed_figures(seed_dir, settle):
    cap = capacity(seed_dir)
    with open(os.path.join(seed_dir, "timeseries.csv")) as f:
        rows = list(csv.DictReader(f))
    ts = [int(r["t"]) for r in rows]
    ratio = []
    for r in rows:
        goal = min(float(r["clients_wants"]), cap)
        ratio.append(float(r["clients_has"]) / max(goal, 1e-9))
    inside = [abs(x - 1.0) <= BAND for x in ratio]
    n = len(rows)
    next_out = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        next_out[i] = i if not inside[i] else next_out[i + 1]
    end = ts[-1] + 1 if ts else 0
    marks = []
    with open(os.path.join(seed_dir, "events.csv")) as f:
        for t, what in list(csv.reader(f))[1:]:
            m = re.search(r"for (\d+) s", what)
            start = float(t) + (float(m.group(1)) if m else 0.0)
            i = next((k for k, x in enumerate(ts) if x >= start), n)
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
            marks.append((kind(what), max(0.0, end - start if took is None else took)))
    dips, run = [], []
    for t, x, ok in zip(ts, ratio, inside):
        if t >= settle and not ok:
            run.append(x)
        elif run:
            dips.append(run)
            run = []
    if run:
        dips.append(run)
    return marks, dips


def pct(v, q):
    v = sorted(v)
    return v[int(q * (len(v) - 1))] if v else 0


def main(path):
    seeds = sorted(d for d in os.listdir(path) if d.startswith("seed-"))
    per_kind = collections.defaultdict(list)
    dips = []
    for s in seeds:
        marks, d = seed_figures(os.path.join(path, s), settle=120)
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
    lengths = [len(d) for d in dips]
    lows = [min(d) for d in dips]
    print(f"\nout of the band (after settle): {sum(lengths)} s in {len(dips)} dips over "
          f"{len(seeds)} simulated hours ({sum(lengths) / max(len(seeds), 1):.0f} s per hour); "
          f"median dip {pct(lengths, 0.5)} s, lowest {100 * pct(lows, 0.5):.1f} %; "
          f"90 % last under {pct(lengths, 0.9) + 1} s; longest {max(lengths, default=0)} s, "
          f"deepest {100 * min(lows, default=1):.1f} %")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
