"""The command line of scripts/check-monitoring.py: its options, the order
of the steps, the comparison of used and exported metric names, and the
verdict (OK, or FAILED with the number of problems).

Must not hold the checks themselves (dashboard, rules, scrape do), and must
not be run on import: scripts/check-monitoring.py calls main() with its
docstring and path.
"""

import argparse
import json
import os
import shutil
import tempfile

from .common import ALERTS, DASHBOARD, ROOT, ensure_yaml
from .dashboard import all_panels, check_dashboard
from .rules import alert_names, find_promtool, promtool_checks
from .scrape import PROMETHEUS_GENERATED, exported_names, scrape_real_servers


def main(doc, script):
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--static-only", action="store_true", help="skip starting servers")
    ap.add_argument("--bin", default=os.environ.get("DOORMAN_BIN", os.path.join(ROOT, "target/debug/doorman")))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, certificates)")
    args = ap.parse_args()
    ensure_yaml(script)
    import yaml

    failures = []
    tmp = tempfile.mkdtemp(prefix="check-monitoring-")
    try:
        print("== dashboard structure:", os.path.relpath(DASHBOARD, ROOT))
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        problems, exprs, used = check_dashboard(dashboard)
        n_panels = sum(1 for p in all_panels(dashboard.get("panels", [])) if p.get("type") != "row")
        for p in problems:
            print("  PROBLEM:", p)
        if not problems:
            print(f"  ok: {n_panels} panels, {len(exprs)} expressions, schemaVersion {dashboard['schemaVersion']}")
        failures += problems

        print("== alert rules:", os.path.relpath(ALERTS, ROOT))
        with open(ALERTS) as f:
            rules_doc = yaml.safe_load(f)
        alert_used, problems = alert_names(rules_doc)
        for p in problems:
            print("  PROBLEM:", p)
        failures += problems
        for n, w in alert_used.items():
            used.setdefault(n, []).extend(w)

        print("== promtool")
        promtool = find_promtool()
        if not promtool:
            failures.append("promtool not found (apt-get install prometheus, or run scripts/test.sh)")
            print("  PROBLEM: promtool not found")
        else:
            failures += promtool_checks(promtool, exprs, tmp)

        print(f"== metric names used by the dashboard and the alerts: {len(used)}")
        if args.static_only:
            for n in sorted(used):
                print("  ", n)
        else:
            if not os.access(args.bin, os.X_OK):
                raise SystemExit(f"{args.bin} not found: cargo build --bin doorman (or set DOORMAN_BIN)")
            print(f"== servers: {os.path.relpath(args.bin, ROOT)} (root with TLS and tokens, leaf, leaf without parent)")
            texts = scrape_real_servers(args.bin, tmp)
            samples, declared = set(), {}
            for name, text in texts.items():
                s, t = exported_names(text)
                print(f"  {name}: {len(s)} sample names, {len(t)} declared")
                samples |= s
                declared.update(t)
            exported = samples | set(declared) | PROMETHEUS_GENERATED
            for base, typ in declared.items():
                if typ in ("histogram", "summary"):
                    exported |= {base + "_sum", base + "_count"} | ({base + "_bucket"} if typ == "histogram" else set())
            missing, misused = [], []
            for n in sorted(used):
                if declared.get(n) in ("histogram", "summary"):
                    misused.append(n)  # a histogram's own name selects no series
                elif n not in exported:
                    missing.append(n)
            for n in misused:
                where = sorted(set(used[n]))
                print(f"  HISTOGRAM NAME: {n} selects nothing; use {n}_bucket, _sum or _count ({', '.join(where)})")
                failures.append(f"{n} used as a series")
            if missing:
                width = max(len(n) for n in missing)
                print(f"MISSING: {len(missing)} metric names used but exported by no server:")
                for n in missing:
                    where = sorted(set(used[n]))
                    print(f"  {n:<{width}}  {', '.join(where[:3])}{' …' if len(where) > 3 else ''}")
                failures.append(f"{len(missing)} metric names missing")
                print("MISSING NAMES (one line): " + " ".join(missing))
            else:
                print(f"  ok: all {len(used)} names are exported")
            unused = sorted(
                n for n in samples
                if n not in used
                and not any(n == b + suf and b + "_bucket" in used for b in declared for suf in ("_sum", "_count"))
            )
            if unused:
                print("  (exported but on neither the dashboard nor the alerts: " + ", ".join(unused) + ")")
    finally:
        if args.keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    if failures:
        print(f"FAILED: {len(failures)} problem(s)")
        return 1
    print("OK")
    return 0
