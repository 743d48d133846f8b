"""The structure of deploy/grafana/doorman.json: schema version,
variables, datasources, panel ids and grid positions, targets; and the
expressions and metric names it uses.

Pure functions of the parsed dashboard. Must not run promtool or servers
and must not print: cli reports the problems.
"""

import re

from .promql import metric_names, variable_query_names


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def is_ds_var(ds):
    return isinstance(ds, dict) and ds.get("uid") in ("${datasource}", "$datasource") and ds.get("type") in (
        "prometheus",
        None,
    )


def check_dashboard(d):
    """(problems, {expr: where}, {name: [where]}) of the dashboard."""
    problems, exprs, used = [], {}, {}
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        problems.append(f"schemaVersion {d.get('schemaVersion')!r}: want >= 36")
    for key in ("uid", "title"):
        if not d.get(key):
            problems.append(f"no dashboard {key}")
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("no `datasource` variable of type datasource with query prometheus")
    for name in ("job", "instance", "template"):
        if name not in variables:
            problems.append(f"no `{name}` variable")
    for name, v in variables.items():
        if v.get("type") != "query":
            continue
        if not is_ds_var(v.get("datasource")):
            problems.append(f"variable {name}: datasource {v.get('datasource')!r} is not ${{datasource}}")
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        if not q:
            problems.append(f"variable {name}: no query")
            continue
        found, bad = variable_query_names(q)
        problems += [f"variable {name}: {b}" for b in bad]
        for n in found:
            used.setdefault(n, []).append(f"variable ${name}")
        m = re.fullmatch(r"label_values\((.*),\s*[\w.]+\s*\)", q.strip(), re.S)
        if m:
            exprs[m.group(1)] = f"variable ${name}"
    ids = {}
    for p in all_panels(d.get("panels", [])):
        title = p.get("title") or "(untitled)"
        where = f"panel {p.get('id')} {title!r}"
        if "id" not in p:
            problems.append(f"{where}: no id")
        elif p["id"] in ids:
            problems.append(f"{where}: id also used by {ids[p['id']]!r}")
        else:
            ids[p["id"]] = title
        gp = p.get("gridPos", {})
        if not all(isinstance(gp.get(k), int) for k in ("x", "y", "w", "h")) or gp.get("x", 0) + gp.get("w", 0) > 24:
            problems.append(f"{where}: bad gridPos {gp!r}")
        if p.get("type") == "row":
            continue
        if not p.get("title"):
            problems.append(f"{where}: no title")
        if not is_ds_var(p.get("datasource")):
            problems.append(f"{where}: datasource {p.get('datasource')!r} is not ${{datasource}}")
        targets = p.get("targets") or []
        if not targets:
            problems.append(f"{where}: no targets")
        refids = set()
        for t in targets:
            ref = t.get("refId")
            if not ref or ref in refids:
                problems.append(f"{where}: target refId {ref!r} missing or repeated")
            refids.add(ref)
            if "datasource" in t and not is_ds_var(t["datasource"]):
                problems.append(f"{where} target {ref}: datasource {t['datasource']!r} is not ${{datasource}}")
            expr = (t.get("expr") or "").strip()
            if not expr:
                problems.append(f"{where} target {ref}: no expr")
                continue
            exprs[expr] = f"{where} target {ref}"
            found, bad = metric_names(expr)
            problems += [f"{where} target {ref}: {b}" for b in bad]
            if not found:
                problems.append(f"{where} target {ref}: selects no metric: {expr}")
            for n in found:
                used.setdefault(n, []).append(f"dashboard {title!r}")
    return problems, exprs, used
