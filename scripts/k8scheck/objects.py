"""Helpers over rendered Kubernetes objects: names, kinds, selectors,
container ports, the kubelet's $(VAR) expansion and walking a manifest.

Pure functions of the objects given. Must not report results, run tools or
touch files.
"""

import re


def name_of(o):
    return f"{o['kind']}/{o['metadata']['name']}"


def workloads(objs):
    return [o for o in objs if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job")]


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def find(objs, kind, name):
    for o in objs:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    return None


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def container_port(container, ref):
    """The containerPort a probe or Service targetPort names (name or number)."""
    for p in container.get("ports", []):
        if ref == p.get("name") or ref == p["containerPort"]:
            return p["containerPort"]
    return None


VAR_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value, mapping, missing):
    """Kubernetes' $(VAR) expansion: $$ escapes, unknown references stay."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        var = m.group(1)
        if var in mapping:
            return mapping[var]
        missing.append(var)
        return m.group(0)
    return VAR_RE.sub(sub, value)


def walk(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield path + (k,), k, v
            yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, path + (i,))


def is_doorman(container):
    return container["image"].split("@")[0].split(":")[0].rsplit("/", 1)[-1] == "doorman"


def secret_names(objs):
    out = set()
    for w in workloads(objs):
        for v in w["spec"]["template"]["spec"].get("volumes", []):
            if "secret" in v:
                out.add(v["secret"]["secretName"])
    return out

