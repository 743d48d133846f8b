"""The smoke test of one overlay: start every pod, wait for readiness,
check liveness and listening addresses, then a lease end to end, a
ConfigMap swap and a Secret renewal, and stop every process.

Reports to R. Must not decide how pods are run or certificates made (pods,
provision), and must not leave a process running.
"""

import fnmatch
import hashlib
import os
import re
import shutil
import tempfile
import time

from .common import R, REPO, log
from .objects import find, secret_names
from .pods import Smoke, metric_value
from .provision import Pki
from .tools import doorman_bin, run_bin


def smoke(overlay, objs, certs, keep, timeout, image=None):
    label = f"smoke {overlay}"
    base = os.path.join(REPO, "target", "tmp")
    os.makedirs(base, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f"k8s-check-{overlay}-", dir=base)
    s = Smoke(overlay, objs, certs, tmp, timeout, image)
    failed_before = R.failed
    try:
        s.plan()
        pki = Pki(os.path.join(tmp, "pki"), certs)
        pki.files = {name: pki.secret(name) for name in sorted(secret_names(objs))}
        names = ", ".join(f"{p.name}" for p in s.pods)
        how = (f"doorman containers from the image {image} (podman), etcd as host processes"
               if image else f"every container as a host process ({doorman_bin()})")
        log(f"{label}: starting {len(s.pods)} pods in {tmp}: {names}; {how}")
        # Kubernetes starts every pod at once; so do we.
        for pod in s.pods:
            s.start(pod, pki)
        print("      rewritten (addresses and mount paths only):")
        for r in s.rewrites:
            print(f"        {r}")
        deadline = time.time() + timeout
        started = time.time()
        ready = {}
        answered = {}   # what the successful probes said ("ready", "grpc SERVING")
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
                    answered[body.strip()[:40]] = answered.get(body.strip()[:40], 0) + 1
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
        said = ", ".join(f"{n} × {what!r}" for what, n in sorted(answered.items()))
        R.ok(f"{label}: all {len(s.pods)} pods ready (readinessProbe: {said}) in "
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
            s.write_volume(pod, pod.dirs[v["name"]], data, v["configMap"].get("defaultMode", 0o644))
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
                s.write_volume(pod, pod.dirs[v["name"]], files,
                               v["secret"].get("defaultMode", 0o644))
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


