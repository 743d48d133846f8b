#!/usr/bin/env python3
"""Prints the markdown table docs/simulation.md shows for one seed sweep.

    doorman-sim run simulations/scenarios/seven.toml --profile ours --seeds 1..30 --jobs 2 --out out/s7-ours
    scripts/sim-table.py out/s7-ours/summary.json

"worst" is the minimum for utilisation and the maximum for the others; the
worst seed is the one that gave it. Figures are from summary.json as
written (no rounding other than for display).
"""
import json
import statistics
import sys

# (key in summary.json, label, percent?, lower is worse?)
ROWS = [
    ("doc_utilisation", "utilisation (doc)", True, True),
    ("doc_utilisation_5s", "utilisation (doc, 5 s samples)", True, True),
    ("shortfall_events", "shortfall events (doc)", False, False),
    ("shortfall_events_5s", "shortfall events (doc, 5 s samples)", False, False),
    ("max_over_capacity", "peak (doc)", True, False),
    ("max_over_capacity_5s", "peak (doc, 5 s samples)", True, False),
    ("mean_over_capacity", "mean while over (doc)", True, False),
    ("ours_utilisation", "utilisation (ours: Σ wants ≥ capacity)", True, True),
    ("reconvergence_s", "re-convergence, from each event's end (60 s hold)", False, False),
    ("reconvergence_from_start_s", "re-convergence, from each event's start (60 s hold)", False, False),
    ("wall_clock_s", "wall clock per run (release)", False, False),
]


def fmt(x, pct, key):
    if pct:
        return f"{100 * x:.2f} %"
    if key == "wall_clock_s":
        return f"{x:.2f} s"
    if key.startswith("reconvergence"):
        return f"{x:.0f} s"
    return f"{x:.1f}" if x != int(x) else f"{int(x)}"


def main(path):
    s = json.load(open(path))
    stats = s["stats"]
    runs = s["runs"]
    print(f"**{s['scenario']}, profile `{s['profile']}`, seeds {runs[0]['seed']}–{runs[-1]['seed']}**\n")
    print("| figure | worst | worst seed | mean | min | max | p95 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key, label, pct, low_bad in ROWS:
        st = stats.get(key)
        if not st or st.get("n", 0) == 0:
            continue
        worst = st["min"] if low_bad else st["max"]
        cells = [fmt(worst, pct, key), str(st["worst_seed"])]
        cells += [fmt(st[k], pct, key) for k in ("mean", "min", "max", "p95")]
        print(f"| {label} | **{cells[0]}** | " + " | ".join(cells[1:]) + " |")
    never = max(r.get("unconverged_marks", 0) for r in runs)
    rpcs = {k: round(statistics.mean(r["rpcs"][k] for r in runs)) for k in runs[0]["rpcs"]}
    print(f"\nMost marks never re-converged before the end on one seed: {never}. "
          f"RPCs per run (mean): {rpcs}.")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
