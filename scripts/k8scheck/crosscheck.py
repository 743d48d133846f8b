"""Checks across directories: optional/cert-manager against the Secrets
and parent names of the overlays, optional/prometheus against their
Services, the external-etcd example, and deploy/Dockerfile.

Each check reports once to R. Must not start pods or servers, and must not
repeat the per-overlay rules of static.
"""

import os
import re

from .common import R, REPO, UID
from .objects import by_kind, expand, find, name_of, secret_names, selects, workloads


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

