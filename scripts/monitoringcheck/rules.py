"""promtool and the alert rules: promtool check and test of
deploy/prometheus, every dashboard expression parsed as a recording rule,
and the alert rules' severity, annotations (each runbook_url a heading
of a page that exists) and metric names.

Must not start servers. Prints promtool's output as it runs.
"""

import os
import re
import shutil

from .common import ALERTS, ALERTS_TEST, ROOT, run
from .promql import metric_names, replace_grafana_vars


def find_promtool():
    for c in (os.environ.get("PROMTOOL"), os.path.join(ROOT, "target/tools/prometheus/usr/bin/promtool")):
        if c and os.access(c, os.X_OK):
            return c
    return shutil.which("promtool")



def promtool_checks(promtool, dashboard_exprs, tmp):
    """Problems from promtool: the rules, their tests, and the dashboard's PromQL."""
    problems = []
    for args in (["check", "rules", ALERTS], ["test", "rules", ALERTS_TEST]):
        r = run([promtool] + args, cwd=ROOT)
        shown = " ".join(["promtool"] + [os.path.relpath(a, ROOT) if a.startswith("/") else a for a in args])
        print(f"$ {shown}\n" + (r.stdout + r.stderr).rstrip())
        if r.returncode != 0:
            problems.append(f"{shown} failed")
    # Every dashboard expression, variables replaced, must parse: promtool
    # parses recording rules.
    import yaml

    rules = [
        {"record": f"dashboard:expr_{i}", "expr": replace_grafana_vars(e)}
        for i, e in enumerate(sorted(dashboard_exprs))
    ]
    path = os.path.join(tmp, "dashboard-exprs.yml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, width=1000)
    r = run([promtool, "check", "rules", path])
    if r.returncode != 0:
        problems.append("dashboard PromQL does not parse:\n" + (r.stdout + r.stderr).rstrip())
    else:
        print(f"dashboard: {len(rules)} PromQL expressions parse (promtool check rules)")
    return problems


def runbook_problem(url):
    """Why `url` (docs/PAGE.md#anchor) names no heading, or None."""
    page, _, anchor = url.partition("#")
    path = os.path.join(ROOT, page)
    if not os.path.isfile(path):
        return f"runbook_url {url}: no file {page}"
    slugs = set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^#+ (.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            slugs.add(slug)
    if anchor and anchor not in slugs:
        return f"runbook_url {url}: no heading #{anchor} in {page}"
    return None


def alert_names(rules_doc):
    """{name: [where]} and problems for the alert rules."""
    used, problems = {}, []
    for g in rules_doc.get("groups", []):
        for rule in g.get("rules", []):
            who = rule.get("alert") or rule.get("record")
            if rule.get("alert"):
                labels, ann = rule.get("labels", {}), rule.get("annotations", {})
                if labels.get("severity") not in ("critical", "warning", "info"):
                    problems.append(f"alert {who}: severity label critical|warning|info")
                for a in ("summary", "description", "runbook_url"):
                    if not ann.get(a):
                        problems.append(f"alert {who}: no {a} annotation")
                why = ann.get("runbook_url") and runbook_problem(ann["runbook_url"])
                if why:
                    problems.append(f"alert {who}: {why}")
            found, bad = metric_names(rule.get("expr", ""))
            problems += [f"alert {who}: {b}" for b in bad]
            for n in found:
                used.setdefault(n, []).append(f"alert {who}")
    return used, problems
