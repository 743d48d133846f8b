"""Static checks of one rendered overlay (or example): schemas, enum
values, the deployment rules of docs/operations.md for every workload,
and `doorman config check` on the ConfigMap configs.

Each check reports once to R. Must not start pods or servers (only
`doorman config check`), and must not look across directories: the
optional directories are checked in crosscheck.
"""

import os
import tempfile

from .common import ACCESS_MODES, ENUMS, ENUMS_AT, K8S_VERSION, R, UID
from .objects import by_kind, container_port, expand, find, is_doorman, name_of, selects, walk, workloads
from .tools import doorman_bin, kubernetes_validate, kv_utils, run_bin


def grpc_probe_problems(cn, c, probe, args):
    """A grpc readiness probe reaches doorman's plaintext health port: the
    kubelet's gRPC probes speak no TLS, and the gRPC port is TLS."""
    port = container_port(c, probe["port"])
    listen = [a.split("=", 1)[1] for a in args if a.startswith("--health-listen=")]
    if not listen:
        return [f"{cn}: a grpc readinessProbe without --health-listen (the gRPC port is TLS)"]
    if not listen[0].endswith(f":{port}"):
        return [f"{cn}: the grpc readinessProbe's port {port} is not --health-listen={listen[0]}"]
    return []


def validate_schemas(label, objs):
    problems = []
    for o in objs:
        try:
            kubernetes_validate.validate(o, K8S_VERSION, strict=True)
        except kv_utils.ValidationError as e:
            where = ".".join(str(p) for p in e.path)
            problems.append(f"{name_of(o)}: {where}: {e.message}")
        except kv_utils.SchemaNotFoundError as e:
            problems.append(f"{name_of(o)}: no schema: {e}")
    R.check(f"{label}: {len(objs)} objects valid against the Kubernetes {K8S_VERSION} schemas "
            "(strict)", problems)


def check_enums(label, objs):
    problems = []
    for o in objs:
        for path, key, value in walk(o):
            parent = path[-2] if len(path) >= 2 else o["kind"]
            if len(path) == 2 and path[0] == "spec":
                parent = o["kind"]
            allowed = ENUMS_AT.get((parent, key))
            if allowed is None and key in ENUMS and isinstance(value, str):
                allowed = ENUMS[key]
            if allowed is not None and isinstance(value, str) and value not in allowed:
                problems.append(f"{name_of(o)}: {'.'.join(map(str, path))}: {value!r} "
                                f"not one of {sorted(allowed)}")
            if key == "accessModes":
                for m in value:
                    if m not in ACCESS_MODES:
                        problems.append(f"{name_of(o)}: accessModes: {m!r}")
    R.check(f"{label}: enum values (imagePullPolicy, restartPolicy, protocol, scheme, ...)",
            problems)


def check_workloads(label, objs, doorman_flags, etcd_flags):
    problems = []
    services = by_kind(objs, "Service")
    pdbs = by_kind(objs, "PodDisruptionBudget")
    configmaps = {o["metadata"]["name"] for o in by_kind(objs, "ConfigMap")}
    for w in workloads(objs):
        wn = name_of(w)
        tpl = w["spec"]["template"]
        spec = tpl["spec"]
        labels = tpl["metadata"].get("labels", {})
        psc = spec.get("securityContext", {})
        if psc.get("runAsNonRoot") is not True:
            problems.append(f"{wn}: pod securityContext.runAsNonRoot is not true")
        if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problems.append(f"{wn}: pod seccompProfile is not RuntimeDefault")
        if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
            problems.append(f"{wn}: uses the host's namespaces")
        if not any(selects(p["spec"].get("selector", {}).get("matchLabels"), labels) for p in pdbs):
            problems.append(f"{wn}: no PodDisruptionBudget selects its pods")
        ann = tpl["metadata"].get("annotations", {})
        if w["kind"] == "StatefulSet":
            svc = find(objs, "Service", w["spec"].get("serviceName", ""))
            if not svc or svc["spec"].get("clusterIP") != "None":
                problems.append(f"{wn}: serviceName {w['spec'].get('serviceName')!r} is not a "
                                "headless Service of this overlay")
        mounts_by_volume = {}
        for c in spec.get("initContainers", []) + spec["containers"]:
            cn = f"{wn} container {c['name']}"
            sc = c.get("securityContext", {})
            uid = sc.get("runAsUser", psc.get("runAsUser"))
            if uid != UID:
                problems.append(f"{cn}: runs as uid {uid}, not {UID}")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{cn}: allowPrivilegeEscalation is not false")
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{cn}: readOnlyRootFilesystem is not true")
            if sc.get("privileged"):
                problems.append(f"{cn}: privileged")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                problems.append(f"{cn}: does not drop ALL capabilities")
            if sc.get("capabilities", {}).get("add"):
                problems.append(f"{cn}: adds capabilities")
            res = c.get("resources", {})
            for kind in ("requests", "limits"):
                for r in ("cpu", "memory"):
                    if r not in res.get(kind, {}):
                        problems.append(f"{cn}: no {kind}.{r}")
            image = c["image"]
            if ":" not in image.rsplit("/", 1)[-1] and "@" not in image:
                problems.append(f"{cn}: image {image} has no tag")
            elif image.endswith(":latest"):
                problems.append(f"{cn}: image {image} uses the latest tag")
            # $(VAR) references: env values may use variables defined above
            # them; command and args any variable of the container.
            defined = {}
            for e in c.get("env", []):
                missing = []
                if "value" in e:
                    expand(e["value"], defined, missing)
                for m in missing:
                    problems.append(f"{cn}: env {e['name']} uses $({m}), which is not defined "
                                    "above it (Kubernetes leaves it unexpanded)")
                defined[e["name"]] = "x"
            for field in ("command", "args"):
                for a in c.get(field, []):
                    missing = []
                    expand(a, defined, missing)
                    for m in missing:
                        problems.append(f"{cn}: {field} {a!r} uses undefined $({m})")
            for probe in ("readinessProbe", "livenessProbe"):
                p = c.get(probe)
                if not p:
                    problems.append(f"{cn}: no {probe}")
                    continue
                get = p.get("httpGet") or p.get("grpc")
                if not get:
                    problems.append(f"{cn}: {probe} is neither httpGet nor grpc")
                elif container_port(c, get["port"]) is None:
                    problems.append(f"{cn}: {probe} port {get['port']!r} is not a container port")
            for m in c.get("volumeMounts", []):
                mounts_by_volume.setdefault(m["name"], []).append(m)
            args = c.get("args", [])
            if is_doorman(c):
                flags = {a.split("=", 1)[0] for a in args if a.startswith("--")}
                for f in sorted(flags - doorman_flags):
                    problems.append(f"{cn}: flag {f} is not in `doorman server --help`")
                if not args or args[0] != "server":
                    problems.append(f"{cn}: args do not start with the subcommand server")
                for f in ("--tls-cert", "--tls-key", "--tls-client-ca"):
                    if f not in flags:
                        problems.append(f"{cn}: no {f} (TLS by default)")
                if "--parent" in flags and "--parent-tls-ca" not in flags:
                    problems.append(f"{cn}: --parent without --parent-tls-ca")
                if "--parent" in flags and "--parent-tls-server-name" not in flags:
                    problems.append(f"{cn}: --parent without --parent-tls-server-name (the "
                                    "parent's standbys redirect to pod IPs its certificate "
                                    "does not name)")
                if not any(a.startswith("--server-id=$(POD_IP)") for a in args):
                    problems.append(f"{cn}: --server-id is not the pod IP")
                if "--election-key" in flags and "--etcd" not in flags:
                    problems.append(f"{cn}: --election-key without --etcd")
                rp = c.get("readinessProbe", {}).get("httpGet", {})
                lp = c.get("livenessProbe", {}).get("httpGet", {})
                rg = c.get("readinessProbe", {}).get("grpc")
                if rg:
                    problems.extend(grpc_probe_problems(cn, c, rg, args))
                elif rp.get("path") != "/readyz":
                    problems.append(f"{cn}: readinessProbe path is {rp.get('path')}, not /readyz")
                if lp.get("path") != "/healthz":
                    problems.append(f"{cn}: livenessProbe path is {lp.get('path')}, not /healthz")
                for p in (rp, lp):
                    if p and p.get("scheme") != "HTTPS":
                        problems.append(f"{cn}: probe scheme {p.get('scheme')} with TLS on")
                http_port = container_port(c, "http")
                if ann.get("prometheus.io/scrape") != "true":
                    problems.append(f"{cn}: no prometheus.io/scrape: \"true\" annotation")
                if ann.get("prometheus.io/port") != str(http_port):
                    problems.append(f"{cn}: prometheus.io/port is {ann.get('prometheus.io/port')}, "
                                    f"the http port is {http_port}")
                if ann.get("prometheus.io/scheme") != "https":
                    problems.append(f"{cn}: prometheus.io/scheme is not https")
            if c["name"] == "etcd" or "etcd" in c["image"]:
                for e in c.get("env", []):
                    if e["name"].startswith("ETCD_"):
                        flag = "--" + e["name"][5:].lower().replace("_", "-")
                        if flag not in etcd_flags:
                            problems.append(f"{cn}: env {e['name']} is no flag of `etcd --help`")
        for v in spec.get("volumes", []):
            if "configMap" in v:
                if v["configMap"]["name"] not in configmaps:
                    problems.append(f"{wn}: ConfigMap {v['configMap']['name']} is not in the overlay")
                for m in mounts_by_volume.get(v["name"], []):
                    if m.get("subPath"):
                        problems.append(f"{wn}: ConfigMap volume {v['name']} mounted with "
                                        "subPath: never updated, no hot reload")
        if not any(selects(s["spec"].get("selector"), labels) for s in services):
            problems.append(f"{wn}: no Service selects its pods")
    for s in services:
        sel = s["spec"].get("selector")
        pods = [w for w in workloads(objs)
                if selects(sel, w["spec"]["template"]["metadata"].get("labels", {}))]
        if not pods:
            problems.append(f"{name_of(s)}: selects no pods")
            continue
        for p in s["spec"]["ports"]:
            target = p.get("targetPort", p["port"])
            for w in pods:
                if not any(container_port(c, target) for c in w["spec"]["template"]["spec"]["containers"]):
                    problems.append(f"{name_of(s)}: port {p.get('name')}: targetPort {target!r} "
                                    f"is no port of {name_of(w)}")
    R.check(f"{label}: security context, resources, probes, annotations, PDBs, Services, "
            "$(VAR) order, flags", problems)


def check_configs(label, objs):
    problems = []
    n = 0
    for cm in by_kind(objs, "ConfigMap"):
        for key, text in (cm.get("data") or {}).items():
            if not key.endswith(".toml"):
                continue
            n += 1
            with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
                f.write(text)
            try:
                p = run_bin(doorman_bin(), ["config", "check", f.name])
            finally:
                os.unlink(f.name)
            out = (p.stdout + p.stderr).strip()
            if p.returncode != 0 or "warning" in out:
                problems.append(f"{name_of(cm)} {key}: {out}")
    if n == 0:
        problems.append("no .toml config in any ConfigMap")
    R.check(f"{label}: `doorman config check` on the ConfigMap configs ({n})", problems)
