#!/usr/bin/env python3
"""Offline checks of deploy/kubernetes (no cluster needed).

  target/venv-k8s/bin/python scripts/k8s-check.py            # everything
  target/venv-k8s/bin/python scripts/k8s-check.py --no-smoke # render + static checks only
  ... --overlay small                                        # one overlay's smoke test

1. Render every overlay and optional directory with the real kustomize
   (`kubectl kustomize`, or $KUSTOMIZE: a standalone kustomize binary).
2. Validate every rendered object against the Kubernetes schemas of
   K8S_VERSION (default 1.30.0) with kubernetes-validate (strict: unknown
   fields are errors). It does not check enum values, so the enums we use
   (imagePullPolicy, restartPolicy, protocol, probe scheme, ...) are
   checked here, as are the deployment rules of docs/operations.md:
   non-root uid 10001, read-only root file system, no privilege
   escalation, all capabilities dropped, requests and limits, probes on
   /healthz and /readyz, scrape annotations, a PodDisruptionBudget per
   workload, Services that select pods and name existing ports, $(VAR)
   references to variables defined above them, every flag of a Doorman
   container known to `doorman server --help` (and every ETCD_* variable
   to `etcd --help`), the root config passing `doorman config check`, and
   the optional cert-manager and Prometheus objects matching the Secrets
   and Services the overlays use.
3. Smoke test, per overlay: every pod of every Deployment and StatefulSet
   is run on this machine as its container is written: command (or the
   image's entrypoint) + args + env, with $(VAR) expanded as the kubelet
   does (POD_IP=127.0.0.1, the pod's name and namespace from the downward
   API). Only addresses and paths are rewritten, and the rewrites are
   printed:
     * every host:port is mapped to a free 127.0.0.1 port: 0.0.0.0 and the
       pod IP to the pod's own port, a Service name to the ports of the
       pods it selects (comma-separated), a StatefulSet pod's DNS name to
       that pod's port;
     * every volume mountPath to a directory of the test, filled as the
       kubelet does: a ConfigMap's keys and a Secret's files behind a
       `..data` symlink, an empty directory for a volume claim;
     * the images' binaries to DOORMAN_BIN (default target/debug/doorman)
       and ETCD_BIN (default `etcd` on PATH, e.g. Debian's etcd-server).
   Secrets get certificates made here with openssl: one CA, and per
   Secret one with exactly the names, key type and common name of the
   matching Certificate in optional/cert-manager, usages server and client
   auth. Like pod IPs in a cluster, 127.0.0.1 is in a certificate only if
   the Certificate lists it (etcd's does, for its own loopback dial), so
   TLS name checks are as strict as in a cluster.
   The test waits (SMOKE_TIMEOUT, default 60 s) until every pod's
   readinessProbe (its httpGet path, port and scheme) answers 200 and
   checks the liveness probes and that nothing listens outside 127.0.0.1;
   then a client with a certificate asks a leaf (through its Service) for
   capacity, the root master must see that lease (mutual TLS and the
   root's serve rule), every pod must be ready with the lease in use, the
   root's ConfigMap files are swapped as the kubelet does and every root
   replica must apply the new config, the root's Secret is renewed (new
   key) and every root replica must re-read it. Every process is stopped
   by pid. A process that exits, or a pod never ready, fails the test with
   its log (--keep, or any failure, keeps the files under target/tmp/).

The last line is "N passed, M failed"; the exit status is 1 if any check failed.
"""

import argparse
import fnmatch
import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

try:
    import kubernetes_validate
    from kubernetes_validate import utils as kv_utils
except ImportError:  # pragma: no cover
    sys.exit("kubernetes-validate is missing: run this with target/venv-k8s/bin/python "
             "(scripts/test.sh creates it)")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K8S = os.environ.get("K8S_DIR") or os.path.join(REPO, "deploy", "kubernetes")
OVERLAYS = ["small", "production"]
EXAMPLES = ["examples/external-etcd"]   # rendered and checked, not smoke-tested
OPTIONAL = ["optional/cert-manager", "optional/prometheus"]
K8S_VERSION = os.environ.get("K8S_VERSION", "1.30.0")
UID = 10001

# Enum values kubernetes-validate does not check (its schemas have none).
ENUMS = {
    "imagePullPolicy": {"Always", "IfNotPresent", "Never"},
    "restartPolicy": {"Always", "OnFailure", "Never"},
    "protocol": {"TCP", "UDP", "SCTP"},
    "scheme": {"HTTP", "HTTPS"},
    "podManagementPolicy": {"OrderedReady", "Parallel"},
    "dnsPolicy": {"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"},
    "operator": {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Equal"},
    "unhealthyPodEvictionPolicy": {"IfHealthyBudget", "AlwaysAllow"},
}
ENUMS_AT = {  # enums that depend on where the key is
    ("Service", "type"): {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"},
    ("strategy", "type"): {"RollingUpdate", "Recreate"},
    ("updateStrategy", "type"): {"RollingUpdate", "OnDelete"},
    ("seccompProfile", "type"): {"RuntimeDefault", "Localhost", "Unconfined"},
}
ACCESS_MODES = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}


# ---------------------------------------------------------------- results

class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, what):
        self.passed += 1
        print(f"ok    {what}", flush=True)

    def fail(self, what, detail=""):
        self.failed += 1
        print(f"FAIL  {what}", flush=True)
        if detail:
            for line in str(detail).rstrip().splitlines():
                print(f"      {line}")
        sys.stdout.flush()

    def check(self, what, problems):
        if problems:
            self.fail(what, "\n".join(problems))
        else:
            self.ok(what)


R = Results()


def log(msg):
    print(f"==> {msg}", flush=True)


# ---------------------------------------------------------------- tools

def kustomize_cmd():
    k = os.environ.get("KUSTOMIZE")
    if k:
        return [k, "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    sys.exit("no kustomize: install kubectl (it embeds kustomize) or set KUSTOMIZE to a "
             "kustomize binary")


def kustomize_version(cmd):
    if cmd[0].endswith("kubectl"):
        out = subprocess.run(["kubectl", "version", "--client"], capture_output=True, text=True).stdout
        m = re.search(r"Kustomize Version: (\S+)", out)
        return f"kubectl kustomize ({m.group(1) if m else 'unknown version'})"
    out = subprocess.run([cmd[0], "version"], capture_output=True, text=True).stdout.strip()
    return f"{cmd[0]} ({out})"


def render(cmd, rel):
    p = subprocess.run(cmd + [os.path.join(K8S, rel)], capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return [d for d in yaml.safe_load_all(p.stdout) if d], None


def doorman_bin():
    # Absolute: the pods run with their own working directories.
    return os.path.abspath(os.environ.get("DOORMAN_BIN")
                           or os.path.join(REPO, "target", "debug", "doorman"))


def etcd_bin():
    return os.path.abspath(os.environ.get("ETCD_BIN") or shutil.which("etcd") or "/usr/bin/etcd")


def retrying(start):
    """Runs start(), retrying for a while if the binary is missing (a
    concurrent cargo build may be replacing it)."""
    for attempt in range(20):
        try:
            return start()
        except FileNotFoundError:
            if attempt == 19:
                raise
            time.sleep(1)


def run_bin(path, args, **kw):
    return retrying(lambda: subprocess.run([path] + args, capture_output=True, text=True, **kw))


def known_flags(text):
    return set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z0-9][a-z0-9-]*)", text))


# ---------------------------------------------------------------- helpers

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


# ---------------------------------------------------------------- static checks

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
                get = p.get("httpGet")
                if get and container_port(c, get["port"]) is None:
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
                if rp.get("path") != "/readyz":
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


def secret_names(objs):
    out = set()
    for w in workloads(objs):
        for v in w["spec"]["template"]["spec"].get("volumes", []):
            if "secret" in v:
                out.add(v["secret"]["secretName"])
    return out


def check_cert_manager(rendered, certs):
    problems = []
    by_secret = {c["spec"]["secretName"]: c for c in certs if c["kind"] == "Certificate"}
    issuers = {c["metadata"]["name"] for c in certs if c["kind"] in ("Issuer", "ClusterIssuer")}
    for overlay, objs in rendered.items():
        for s in sorted(secret_names(objs)):
            c = by_secret.get(s)
            if not c:
                problems.append(f"{overlay}: Secret {s} has no Certificate in optional/cert-manager")
                continue
            usages = set(c["spec"].get("usages", []))
            for u in ("server auth", "client auth"):
                if u not in usages:
                    problems.append(f"Certificate {c['metadata']['name']}: no usage {u!r}")
            if c["spec"]["issuerRef"]["name"] not in issuers:
                problems.append(f"Certificate {c['metadata']['name']}: issuer "
                                f"{c['spec']['issuerRef']['name']} not defined")
        # The names clients check must be in the parent tier's certificate.
        for w in workloads(objs):
            for c in w["spec"]["template"]["spec"]["containers"]:
                env = {e["name"]: e.get("value", "") for e in c.get("env", [])}
                for a in c.get("args", []):
                    if a.startswith("--parent-tls-server-name="):
                        name = expand(a.split("=", 1)[1], env, [])
                        svc = find(objs, "Service", name)
                        if not svc:
                            problems.append(f"{overlay}: {name_of(w)}: --parent-tls-server-name "
                                            f"{name} is no Service")
                            continue
                        parents = [p for p in workloads(objs) if selects(
                            svc["spec"]["selector"], p["spec"]["template"]["metadata"]["labels"])]
                        for p in parents:
                            for s in secret_names([p]):
                                cert = by_secret.get(s)
                                if cert and name not in cert["spec"].get("dnsNames", []):
                                    problems.append(f"{overlay}: {name_of(w)} checks its parent "
                                                    f"as {name}, not a DNS name of {s}")
    R.check("optional/cert-manager: a Certificate (server and client auth) for every Secret the "
            "overlays mount, naming what clients check", problems)


def check_service_monitors(rendered, monitors, certs):
    problems = []
    prod = rendered.get("production", [])
    by_secret = {c["spec"]["secretName"]: c for c in certs if c["kind"] == "Certificate"}
    for m in monitors:
        if m["kind"] != "ServiceMonitor":
            continue
        sel = m["spec"]["selector"]["matchLabels"]
        svcs = [s for s in by_kind(prod, "Service") if selects(sel, s["metadata"].get("labels", {}))]
        if not svcs:
            problems.append(f"{name_of(m)}: selects no Service of the production overlay")
        for ep in m["spec"]["endpoints"]:
            if ep.get("scheme", "http") not in ("http", "https"):
                problems.append(f"{name_of(m)}: scheme {ep.get('scheme')!r} (http or https)")
            for s in svcs:
                if not any(p.get("name") == ep["port"] for p in s["spec"]["ports"]):
                    problems.append(f"{name_of(m)}: {name_of(s)} has no port {ep['port']}")
            tls = ep.get("tlsConfig", {})
            secret = tls.get("ca", {}).get("secret", {}).get("name")
            cert = by_secret.get(secret)
            if not cert:
                problems.append(f"{name_of(m)}: CA Secret {secret} is not issued by "
                                "optional/cert-manager")
            elif tls.get("serverName") not in cert["spec"].get("dnsNames", []):
                problems.append(f"{name_of(m)}: serverName {tls.get('serverName')} is not in "
                                f"{secret}'s DNS names")
    R.check("optional/prometheus: ServiceMonitors select Services, ports and certificate names "
            "that exist", problems)


def check_external_etcd(label, objs):
    problems = [f"{name_of(o)} is still there" for o in objs
                if o["metadata"]["name"].startswith("doorman-etcd")]
    for w in workloads(objs):
        for c in w["spec"]["template"]["spec"]["containers"]:
            env = [e for e in c.get("env", []) if e["name"] == "DOORMAN_ETCD"]
            if len(env) != 1 or "example.net" not in env[0].get("value", ""):
                problems.append(f"{name_of(w)}: DOORMAN_ETCD is {env}")
    R.check(f"{label}: the bundled etcd removed, every Doorman pod pointed at the external one",
            problems)


def check_dockerfile():
    problems = []
    path = os.path.join(REPO, "deploy", "Dockerfile")
    text = open(path).read()
    if 'ENTRYPOINT ["/usr/local/bin/doorman"]' not in text:
        problems.append("ENTRYPOINT is not [\"/usr/local/bin/doorman\"] (the smoke test "
                        "runs the doorman image's entrypoint as that binary)")
    if not re.search(r"(?m)^USER 10001(:10001)?\s*$", text):
        problems.append(f"the runtime stage's USER is not {UID}")
    if "org.opencontainers.image.version" not in text:
        problems.append("no org.opencontainers.image.version label")
    di = os.path.join(REPO, ".dockerignore")
    if not os.path.exists(di) or "target" not in open(di).read():
        problems.append(".dockerignore missing or not ignoring target/")
    R.check("deploy/Dockerfile: entrypoint, uid, version label; .dockerignore", problems)


# ---------------------------------------------------------------- smoke test

def free_port(held):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
    return s.getsockname()[1]


def openssl(*args, cwd):
    p = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {p.stderr}")


def make_key(path, spec, cwd):
    pk = (spec or {}).get("privateKey", {})
    if pk.get("algorithm", "RSA").upper() == "ECDSA":
        curve = {256: "prime256v1", 384: "secp384r1", 521: "secp521r1"}[pk.get("size", 256)]
        # cert-manager's default encoding (PKCS1) is SEC1 for EC keys.
        openssl("ecparam", "-name", curve, "-genkey", "-noout", "-out", path, cwd=cwd)
    else:
        openssl("genrsa", "-traditional", "-out", path, str(pk.get("size", 2048)), cwd=cwd)


class Pki:
    """A CA and certificates shaped like cert-manager's, made with openssl."""

    def __init__(self, d, certs):
        self.d = d
        self.by_secret = {c["spec"]["secretName"]: c for c in certs if c["kind"] == "Certificate"}
        os.makedirs(d, exist_ok=True)
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                "-subj", "/CN=k8s-check CA", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
        self.issue("client", None, ["URI:spiffe://example.org/k8s-check/client"], "clientAuth")

    def path(self, name):
        return os.path.join(self.d, name)

    def issue(self, name, spec, sans, eku):
        d = self.d
        make_key(f"{name}.key", spec, d)
        cn = (spec or {}).get("commonName", name)
        openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}",
                cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName={','.join(sans)}\nextendedKeyUsage={eku}\n"
                    "keyUsage=critical,digitalSignature,keyEncipherment\n"
                    "basicConstraints=CA:FALSE\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext",
                cwd=d)

    def secret(self, name):
        """The files of Secret `name`: tls.crt, tls.key, ca.crt (a new key each time)."""
        spec = self.by_secret.get(name, {}).get("spec", {})
        # Exactly the names of the Certificate: like a pod IP in a
        # cluster, 127.0.0.1 is in a certificate only if it lists it (etcd's
        # does), so a missing --parent-tls-server-name fails here too.
        if spec:
            sans = [f"DNS:{n}" for n in spec.get("dnsNames", [])]
            sans += [f"IP:{ip}" for ip in spec.get("ipAddresses", [])]
        else:
            sans = [f"DNS:{name}", "DNS:localhost", "IP:127.0.0.1"]
        self.issue(name, spec, sans, "serverAuth,clientAuth")
        return {key: open(self.path(f)).read()
                for key, f in (("tls.crt", f"{name}.crt"), ("tls.key", f"{name}.key"),
                               ("ca.crt", "ca.crt"))}


def atomic_write(dirpath, files, mode):
    """The kubelet's AtomicWriter: files in a timestamped directory, a
    `..data` symlink to it swapped atomically, and per-key symlinks
    through `..data`."""
    os.makedirs(dirpath, exist_ok=True)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.") + secrets.token_hex(4)
    target = os.path.join(dirpath, stamp)
    os.mkdir(target)
    for key, content in files.items():
        p = os.path.join(target, key)
        with open(p, "w") as f:
            f.write(content)
        os.chmod(p, mode)
    old = os.path.realpath(os.path.join(dirpath, "..data")) if os.path.islink(
        os.path.join(dirpath, "..data")) else None
    tmp = os.path.join(dirpath, "..data_tmp")
    os.symlink(stamp, tmp)
    os.rename(tmp, os.path.join(dirpath, "..data"))
    for key in files:
        link = os.path.join(dirpath, key)
        if not os.path.islink(link):
            os.symlink(os.path.join("..data", key), link)
    if old and os.path.basename(old) != stamp:
        shutil.rmtree(old)


class Pod:
    def __init__(self, workload, index):
        self.w = workload
        self.kind = workload["kind"]
        self.name = f"{workload['metadata']['name']}-{index}"
        self.ns = workload["metadata"].get("namespace", "default")
        self.tpl = workload["spec"]["template"]
        self.spec = self.tpl["spec"]
        self.labels = self.tpl["metadata"].get("labels", {})
        self.ports = {}      # containerPort -> local port
        self.dirs = {}       # volume name -> local directory
        self.procs = []      # (container name, Popen, log path)
        self.dir = None

    def container_port(self, ref):
        for c in self.spec["containers"]:
            p = container_port(c, ref)
            if p is not None:
                return p
        return None


class Smoke:
    def __init__(self, overlay, objs, certs, tmp, timeout):
        self.overlay = overlay
        self.objs = objs
        self.certs = certs
        self.tmp = tmp
        self.timeout = timeout
        self.pods = []
        self.rewrites = []
        self.hosts = {}

    # ---- set-up

    def plan(self):
        held = []
        for w in workloads(self.objs):
            for i in range(w["spec"].get("replicas", 1)):
                pod = Pod(w, i)
                pod.dir = os.path.join(self.tmp, pod.name)
                os.makedirs(pod.dir)
                for c in pod.spec["containers"]:
                    for p in c.get("ports", []):
                        pod.ports[p["containerPort"]] = free_port(held)
                self.pods.append(pod)
        for s in held:
            s.close()
        # Names a pod may dial: Services (short and qualified) and
        # StatefulSet pods behind their governing Service.
        for s in by_kind(self.objs, "Service"):
            n, ns = s["metadata"]["name"], s["metadata"].get("namespace", "default")
            for h in (n, f"{n}.{ns}", f"{n}.{ns}.svc", f"{n}.{ns}.svc.cluster.local"):
                self.hosts[h] = ("service", s)
        for pod in self.pods:
            if pod.kind == "StatefulSet":
                gov = pod.w["spec"]["serviceName"]
                for h in (f"{pod.name}.{gov}", f"{pod.name}.{gov}.{pod.ns}",
                          f"{pod.name}.{gov}.{pod.ns}.svc",
                          f"{pod.name}.{gov}.{pod.ns}.svc.cluster.local"):
                    self.hosts[h] = ("pod", pod)

    def endpoints(self, host, port, pod):
        own = ("0.0.0.0", "[::]", "127.0.0.1", "localhost")
        if host in own:
            if port not in pod.ports:
                raise ValueError(f"{host}:{port} is no containerPort of {pod.name}")
            return [pod.ports[port]]
        kind, target = self.hosts.get(host, (None, None))
        if kind == "pod":
            if port not in target.ports:
                raise ValueError(f"{host}:{port} is no containerPort of {target.name}")
            return [target.ports[port]]
        if kind == "service":
            sp = [p for p in target["spec"]["ports"] if p["port"] == port]
            if not sp:
                raise ValueError(f"Service {target['metadata']['name']} has no port {port}")
            tp = sp[0].get("targetPort", port)
            pods = [p for p in self.pods if selects(target["spec"].get("selector"), p.labels)]
            if not pods:
                raise ValueError(f"Service {target['metadata']['name']} selects no pod")
            return [p.ports[p.container_port(tp)] for p in pods]
        raise ValueError(f"unknown address {host}:{port} (no Service, pod or own address)")

    ADDR = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)?"
                      r"(?P<host>\[[0-9a-fA-F:.]*\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
                      r":(?P<port>\d{1,5})(?![\d])")

    def rewrite(self, value, pod, mounts, where):
        def sub(m):
            scheme = m.group("scheme") or ""
            ports = self.endpoints(m.group("host"), int(m.group("port")), pod)
            return ",".join(f"{scheme}127.0.0.1:{p}" for p in ports)
        new = self.ADDR.sub(sub, value)
        for mount, local in mounts:
            new = re.sub(re.escape(mount) + r"(?=/|$|,)", local, new)
        if new != value:
            self.rewrites.append(f"{pod.name} {where}: {value}  ->  {new.replace(self.tmp, '$TMP')}")
        return new

    def materialise(self, pod, pki):
        for v in pod.spec.get("volumes", []):
            d = os.path.join(pod.dir, "volumes", v["name"])
            if "configMap" in v:
                cm = find(self.objs, "ConfigMap", v["configMap"]["name"])
                data = dict(cm.get("data") or {})
                if v["configMap"].get("items"):
                    data = {i["path"]: data[i["key"]] for i in v["configMap"]["items"]}
                atomic_write(d, data, v["configMap"].get("defaultMode", 0o644))
            elif "secret" in v:
                atomic_write(d, pki.files[v["secret"]["secretName"]],
                             v["secret"].get("defaultMode", 0o644))
            elif "emptyDir" in v:
                os.makedirs(d)
            else:
                raise ValueError(f"{pod.name}: volume {v['name']}: kind not supported by the test")
            pod.dirs[v["name"]] = d
        for t in pod.w["spec"].get("volumeClaimTemplates", []):
            d = os.path.join(pod.dir, "volumes", t["metadata"]["name"])
            os.makedirs(d, mode=0o700)
            pod.dirs[t["metadata"]["name"]] = d

    def command_line(self, pod, c):
        """command + args + env as the kubelet builds them, then rewritten."""
        fields = {"metadata.name": pod.name, "metadata.namespace": pod.ns,
                  "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1",
                  "spec.nodeName": "k8s-check-node"}
        env = {}
        for e in c.get("env", []):
            if "value" in e:
                missing = []
                env[e["name"]] = expand(e["value"], env, missing)
                if missing:
                    raise ValueError(f"{pod.name}: env {e['name']}: $({missing[0]}) is not defined "
                                     "above it")
            elif "fieldRef" in e.get("valueFrom", {}):
                env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                raise ValueError(f"{pod.name}: env {e['name']}: valueFrom not supported by the test")
        image = c["image"].split("@")[0].split(":")[0].rsplit("/", 1)[-1]
        binaries = {"/usr/local/bin/doorman": doorman_bin(), "/usr/local/bin/etcd": etcd_bin()}
        entrypoints = {"doorman": ["/usr/local/bin/doorman"]}  # deploy/Dockerfile
        command = c.get("command") or entrypoints.get(image)
        if not command:
            raise ValueError(f"{pod.name}: image {c['image']}: entrypoint unknown to the test")
        missing = []
        argv = [expand(a, env, missing) for a in command + c.get("args", [])]
        if missing:
            raise ValueError(f"{pod.name}: command/args use undefined $({missing[0]})")
        if argv[0] not in binaries:
            raise ValueError(f"{pod.name}: {argv[0]}: no local binary for it")
        mounts = sorted(((m["mountPath"], pod.dirs[m["name"]]) for m in c.get("volumeMounts", [])),
                        key=lambda x: -len(x[0]))
        argv = [binaries[argv[0]]] + [self.rewrite(a, pod, mounts, "arg") for a in argv[1:]]
        env = {k: self.rewrite(v, pod, mounts, f"env {k}") for k, v in env.items()}
        for k, v in list(env.items()) + [("argv", " ".join(argv))]:
            if re.search(r"0\.0\.0\.0|\[::\]", v):
                raise ValueError(f"{pod.name}: {k} still binds a wildcard address: {v}")
        return argv, env

    def start(self, pod, pki):
        self.materialise(pod, pki)
        for c in pod.spec["containers"]:
            argv, env = self.command_line(pod, c)
            full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": pod.dir,
                        "HOSTNAME": pod.name}
            full_env.update(env)
            logpath = os.path.join(pod.dir, f"{c['name']}.log")
            logf = open(logpath, "w")
            p = retrying(lambda: subprocess.Popen(
                argv, env=full_env, cwd=pod.dir, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True))
            logf.close()
            pod.procs.append((c["name"], p, logpath))

    # ---- probes

    def probe(self, pod, which="readinessProbe"):
        """(status, body) of the pod's first container probe, or an error string."""
        for c in pod.spec["containers"]:
            get = (c.get(which) or {}).get("httpGet")
            if not get:
                continue
            port = pod.ports[container_port(c, get["port"])]
            scheme = get.get("scheme", "HTTP").lower()
            url = f"{scheme}://127.0.0.1:{port}{get['path']}"
            return http_get(url)
        return (None, "no httpGet probe")

    def metrics(self, pod):
        for c in pod.spec["containers"]:
            get = (c.get("readinessProbe") or {}).get("httpGet")
            if get:
                port = pod.ports[container_port(c, get["port"])]
                return http_get(f"{get.get('scheme', 'HTTP').lower()}://127.0.0.1:{port}/metrics")
        return (None, "")

    def exited(self):
        return [(pod, cn, p, lp) for pod in self.pods for cn, p, lp in pod.procs
                if p.poll() is not None]

    def logs(self, pod, lines=40):
        out = []
        for cn, p, lp in pod.procs:
            code = p.poll()
            state = "running" if code is None else f"exited with {code}"
            out.append(f"--- {pod.name}/{cn} (pid {p.pid}, {state}), last {lines} lines of {lp}:")
            try:
                text = re.sub(r"\x1b\[[0-9;]*m", "", open(lp, errors="replace").read())
                out += text.splitlines()[-lines:]
            except OSError as e:
                out.append(str(e))
        return "\n".join(out)

    def stop(self):
        procs = [(pod, cn, p) for pod in self.pods for cn, p, _ in pod.procs]
        for _, _, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        slow = []
        for pod, cn, p in procs:
            grace = pod.spec.get("terminationGracePeriodSeconds", 30)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                slow.append(f"{pod.name}/{cn} (pid {p.pid}) still running {grace} s after SIGTERM")
                p.kill()
                p.wait()
        return slow

    def listening_outside_loopback(self):
        """Sockets our processes listen on that are not on 127.0.0.1."""
        pids = {str(p.pid) for pod in self.pods for _, p, _ in pod.procs}
        if not shutil.which("ss"):
            return None
        out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
        bad = []
        for line in out.splitlines():
            found = set(re.findall(r"pid=(\d+)", line)) & pids
            if found and not line.split()[3].startswith("127.0.0.1:"):
                bad.append(line)
        return bad


def http_get(url, timeout=2.0, ctx=None):
    if ctx is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE   # as the kubelet's HTTPS probes
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except Exception as e:  # noqa: BLE001 - any failure is "not ready"
        return None, f"{type(e).__name__}: {e}"


def metric_value(text, name, **labels):
    total = None
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = re.match(r"([a-z_:]+)(\{[^}]*\})?\s+(\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total = (total or 0) + float(m.group(3))
    return total


def smoke(overlay, objs, certs, keep, timeout):
    label = f"smoke {overlay}"
    base = os.path.join(REPO, "target", "tmp")
    os.makedirs(base, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f"k8s-check-{overlay}-", dir=base)
    s = Smoke(overlay, objs, certs, tmp, timeout)
    failed_before = R.failed
    try:
        s.plan()
        pki = Pki(os.path.join(tmp, "pki"), certs)
        pki.files = {name: pki.secret(name) for name in sorted(secret_names(objs))}
        names = ", ".join(f"{p.name}" for p in s.pods)
        log(f"{label}: starting {len(s.pods)} pods in {tmp}: {names}")
        # Kubernetes starts every pod at once; so do we.
        for pod in s.pods:
            s.start(pod, pki)
        print("      rewritten (addresses and mount paths only):")
        for r in s.rewrites:
            print(f"        {r}")
        deadline = time.time() + timeout
        started = time.time()
        ready = {}
        last = {}
        while time.time() < deadline and len(ready) < len(s.pods):
            dead = s.exited()
            if dead:
                break
            for pod in s.pods:
                if pod.name in ready:
                    continue
                status, body = s.probe(pod)
                last[pod.name] = f"{status} {body.strip()[:200]}"
                if status == 200:
                    ready[pod.name] = time.time() - started
            time.sleep(0.5)
        dead = s.exited()
        if dead:
            R.fail(f"{label}: a process exited",
                   "\n".join(s.logs(pod) for pod in {d[0] for d in dead}))
            return
        if len(ready) < len(s.pods):
            R.fail(f"{label}: pods not ready after {timeout} s",
                   "\n".join(f"{p.name}: readinessProbe answered {last.get(p.name)}\n{s.logs(p)}"
                             for p in s.pods if p.name not in ready))
            return
        R.ok(f"{label}: all {len(s.pods)} pods ready (readinessProbe 200) in "
             f"{max(ready.values()):.1f} s: " +
             ", ".join(f"{n} {t:.1f} s" for n, t in sorted(ready.items(), key=lambda x: x[1])))
        for pod in s.pods:
            status, body = s.probe(pod, "livenessProbe")
            if status != 200:
                R.fail(f"{label}: {pod.name} livenessProbe answered {status} {body.strip()[:200]}")
        bad = s.listening_outside_loopback()
        if bad is None:
            print("      (ss not found: listening addresses not checked)")
        else:
            R.check(f"{label}: every process listens on 127.0.0.1 only", bad)
        end_to_end(s, pki, label)
        config_reload(s, label)
        secret_rotation(s, pki, label)
        dead = s.exited()
        if dead:
            R.fail(f"{label}: a process exited during the checks",
                   "\n".join(s.logs(pod) for pod in {d[0] for d in dead}))
    except Exception as e:  # noqa: BLE001
        R.fail(f"{label}: {type(e).__name__}: {e}",
               "\n".join(s.logs(p, 20) for p in s.pods if p.procs))
    finally:
        slow = s.stop()
        for line in slow:
            print(f"      warning: {line}")
        if keep or R.failed > failed_before:
            print(f"      files and logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def tier(s, component):
    return [p for p in s.pods if p.labels.get("app.kubernetes.io/component") == component
            and p.labels.get("app.kubernetes.io/name") == "doorman"]


def resource_wants(text, resource):
    """doorman_server_resource_wants for one resource: its own series, or
    its template's (servers that label by template, `resource` optional)."""
    total = None
    for line in text.splitlines():
        m = re.match(r"doorman_server_resource_wants(\{[^}]*\})?\s+(\S+)$", line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        res, tpl = labels.get("resource"), labels.get("template")
        if res == resource or (tpl and fnmatch.fnmatchcase(resource, tpl)
                               and res in (None, "_other")):
            total = (total or 0) + float(m.group(2))
    return total


def end_to_end(s, pki, label):
    """A client with a certificate asks a leaf (through its Service) for
    capacity; the tier above must see the lease, up to the root."""
    leaves, roots = tier(s, "leaf"), tier(s, "root")
    svc = find(s.objs, "Service", "doorman-leaf")
    port = [p for p in svc["spec"]["ports"] if p["name"] == "grpc"][0]["port"]
    server = f"127.0.0.1:{s.endpoints('doorman-leaf', port, leaves[0])[0]}"
    resource = "db/users/42"
    p = run_bin(doorman_bin(), [
        "get", "--server", server, "--resource", resource, "--wants", "10", "--json",
        "--tls-ca", pki.path("ca.crt"), "--tls-cert", pki.path("client.crt"),
        "--tls-key", pki.path("client.key"), "--tls-server-name", "doorman-leaf"],
        timeout=30)
    if p.returncode != 0:
        R.fail(f"{label}: `doorman get` through the leaf Service failed",
               (p.stdout + p.stderr).strip())
        return
    R.ok(f"{label}: a client with a certificate got a lease from a leaf: {p.stdout.strip()[:160]}")
    # The root's master must hear about it from the tier below (learning
    # mode may still grant 0; the request is what counts).
    deadline = time.time() + 20
    seen = None
    while time.time() < deadline and seen is None:
        for r in roots:
            status, text = s.metrics(r)
            if status == 200 and metric_value(text, "doorman_server_is_master") == 1:
                wants = resource_wants(text, resource)
                denied = metric_value(text, "doorman_server_access_denied_total") or 0
                if denied:
                    R.fail(f"{label}: the root denied the tier below it",
                           "\n".join(l for l in text.splitlines() if "denied" in l))
                    return
                if wants:
                    seen = (r.name, wants)
        time.sleep(0.5)
    if seen:
        R.ok(f"{label}: the root master {seen[0]} sees the lease for {resource} "
             f"(wants {seen[1]:g}) through mutual TLS and its serve rule")
    else:
        R.fail(f"{label}: the root never saw a lease for {resource} within 20 s",
               "\n".join(s.logs(p, 15) for p in roots + leaves))
    # With a resource in use, a leaf's (and parent's) readiness also needs
    # a lease from its parent: every pod must (still, or again) be ready.
    deadline = time.time() + 15
    while True:
        answers = {p.name: s.probe(p) for p in s.pods}
        late = {n: a for n, a in answers.items() if a[0] != 200}
        if not late or time.time() > deadline:
            break
        time.sleep(0.5)
    R.check(f"{label}: every pod ready with a lease in use",
            [f"{n}: {a[0]} {a[1].strip()[:200]}" for n, a in sorted(late.items())])


def config_reload(s, label):
    """Swap the ConfigMap's files as the kubelet does on an update; every
    pod mounting it must apply the new config without a restart."""
    pods = [p for p in s.pods for v in p.spec.get("volumes", []) if "configMap" in v]
    if not pods:
        return
    new_hash = {}
    for pod in pods:
        for v in pod.spec["volumes"]:
            if "configMap" not in v:
                continue
            cm = find(s.objs, "ConfigMap", v["configMap"]["name"])
            data = dict(cm["data"])
            for k in data:
                if k.endswith(".toml"):
                    data[k] += "\n# changed by scripts/k8s-check.py\n"
                    new_hash[pod.name] = hashlib.sha256(data[k].encode()).hexdigest()
            atomic_write(pod.dirs[v["name"]], data, v["configMap"].get("defaultMode", 0o644))
    deadline = time.time() + 15
    pending = set(new_hash)
    while time.time() < deadline and pending:
        for pod in pods:
            if pod.name not in pending:
                continue
            status, text = s.metrics(pod)
            info = [l for l in text.splitlines() if l.startswith("doorman_server_config_info")]
            if status == 200 and any(new_hash[pod.name][:12] in l for l in info):
                pending.discard(pod.name)
        time.sleep(0.5)
    if pending:
        R.fail(f"{label}: config not re-applied after the ConfigMap's ..data swap: "
               f"{', '.join(sorted(pending))}",
               "\n".join(s.logs(p, 15) for p in pods if p.name in pending))
    else:
        R.ok(f"{label}: every pod mounting the ConfigMap applied the swapped file "
             f"({', '.join(sorted(new_hash))}; sha256 {next(iter(new_hash.values()))[:12]})")


def secret_rotation(s, pki, label):
    """Re-issue the root's certificate (new key) into its Secret volume as
    cert-manager and the kubelet would; every root replica must re-read it."""
    roots = tier(s, "root")
    secret = [v["secret"]["secretName"] for v in roots[0].spec["volumes"] if "secret" in v][0]

    def reloads(pod):
        status, text = s.metrics(pod)
        return metric_value(text, "doorman_server_tls_reloads_total", result="ok") or 0

    before = {p.name: reloads(p) for p in roots}
    files = pki.secret(secret)
    for pod in roots:
        for v in pod.spec["volumes"]:
            if v.get("secret", {}).get("secretName") == secret:
                atomic_write(pod.dirs[v["name"]], files, v["secret"].get("defaultMode", 0o644))
    deadline = time.time() + 15
    pending = {p.name for p in roots}
    while time.time() < deadline and pending:
        for pod in roots:
            if pod.name in pending and reloads(pod) > before[pod.name]:
                pending.discard(pod.name)
        time.sleep(0.5)
    if pending:
        R.fail(f"{label}: {secret} renewed, not re-read by {', '.join(sorted(pending))}",
               "\n".join(s.logs(p, 15) for p in roots if p.name in pending))
        return
    # The tier below still leases through the new certificate.
    leaves = tier(s, "leaf")
    ok = all(s.probe(p)[0] == 200 for p in roots + leaves)
    R.check(f"{label}: {secret} renewed in place (new key): every root replica re-read it "
            "(doorman_server_tls_reloads_total{result=\"ok\"})",
            [] if ok else ["a pod is not ready after the renewal"])


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--overlay", action="append", choices=OVERLAYS,
                    help="smoke-test only these overlays (default: all)")
    ap.add_argument("--no-smoke", action="store_true", help="render and static checks only")
    ap.add_argument("--keep", action="store_true", help="keep the smoke test's files and logs")
    args = ap.parse_args()
    timeout = float(os.environ.get("SMOKE_TIMEOUT", "60"))

    cmd = kustomize_cmd()
    if not os.path.exists(doorman_bin()):
        time.sleep(10)  # a concurrent build may be replacing it
        if not os.path.exists(doorman_bin()):
            sys.exit(f"{doorman_bin()} not found: build it (cargo build --bin doorman) or set "
                     "DOORMAN_BIN")
    if not os.path.exists(etcd_bin()):
        sys.exit(f"{etcd_bin()} not found: apt-get install etcd-server, or set ETCD_BIN")
    log(f"rendering with {kustomize_version(cmd)}; schemas: kubernetes-validate "
        f"{kubernetes_validate.__version__ if hasattr(kubernetes_validate, '__version__') else ''}"
        f" for Kubernetes {K8S_VERSION}; doorman: {doorman_bin()}; etcd: {etcd_bin()}")
    help_text = run_bin(doorman_bin(), ["server", "--help"]).stdout
    doorman_flags = known_flags(help_text)
    if "--listen" not in doorman_flags:
        sys.exit(f"cannot read the flags of {doorman_bin()} server --help")
    etcd_help = run_bin(etcd_bin(), ["--help"])
    etcd_flags = known_flags(etcd_help.stdout + etcd_help.stderr)

    rendered = {}
    for o in OVERLAYS:
        objs, err = render(cmd, f"overlays/{o}")
        if err:
            R.fail(f"render overlays/{o}", err)
            continue
        R.ok(f"render overlays/{o}: " + ", ".join(sorted(name_of(x) for x in objs)))
        rendered[o] = objs
    optional = {}
    for rel in OPTIONAL:
        objs, err = render(cmd, rel)
        if err:
            R.fail(f"render {rel}", err)
            continue
        R.ok(f"render {rel}: {len(objs)} objects ({', '.join(sorted({x['kind'] for x in objs}))}; "
             "CRDs, not schema-checked)")
        optional[rel] = objs

    for rel in EXAMPLES:
        objs, err = render(cmd, rel)
        if err:
            R.fail(f"render {rel}", err)
            continue
        R.ok(f"render {rel}: " + ", ".join(sorted(name_of(x) for x in objs)))
        rendered[rel] = objs
        check_external_etcd(rel, objs)

    for o, objs in rendered.items():
        label = o if "/" in o else f"overlays/{o}"
        validate_schemas(label, objs)
        check_enums(label, objs)
        check_workloads(label, objs, doorman_flags, etcd_flags)
        check_configs(label, objs)
    certs = optional.get("optional/cert-manager", [])
    if certs:
        check_cert_manager(rendered, certs)
    if "optional/prometheus" in optional:
        check_service_monitors(rendered, optional["optional/prometheus"], certs)
    check_dockerfile()

    if not args.no_smoke:
        for o in args.overlay or OVERLAYS:
            if o in rendered:
                smoke(o, rendered[o], certs, args.keep, timeout)

    print(f"k8s-check: {R.passed} passed, {R.failed} failed")
    return 1 if R.failed else 0


if __name__ == "__main__":
    sys.exit(main())
