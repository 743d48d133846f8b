"""The metric names real servers export: start a root (TLS, tokens,
access rules), a leaf and a leaf whose parent is down, drive them so that
event-only series exist, and scrape /metrics; parse an exposition's
sample and declared names.

Must not know which names the dashboard or rules use (cli compares), and
must leave no server running.
"""

import os
import re
import shutil
import socket
import ssl
import time

from checklib.ports import free_port

from .common import run
from .servers import ROOT_CONFIG, Servers, grpc_frame_duplicate_ids, http_get, make_tls, wait_healthy

# Series Prometheus itself makes for every target or alert: no server exports them.
PROMETHEUS_GENERATED = {
    "up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
    "scrape_series_added", "ALERTS", "ALERTS_FOR_STATE",
}



def exported_names(text):
    """(sample names, {declared name: type}) of a Prometheus text exposition."""
    samples, types = set(), {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
        elif line.startswith("# HELP "):
            types.setdefault(line.split()[2], "untyped")
        elif line and not line.startswith("#"):
            samples.add(re.match(r"[A-Za-z_:][\w:]*", line).group(0))
    return samples, types


def scrape_real_servers(binary, tmp):
    """{server: /metrics text} from a root, a leaf and a leaf without a parent, driven a little."""
    if not shutil.which("curl"):
        raise RuntimeError("curl not found")
    make_tls(binary, tmp)
    tokens = {"leaf": "leaf-token-check-monitoring", "client": "client-token-check-monitoring"}
    for who, tok in tokens.items():
        with open(os.path.join(tmp, f"{who}.token"), "w") as f:
            f.write(tok + "\n")
    with open(os.path.join(tmp, "tokens.toml"), "w") as f:
        for who, tok in tokens.items():
            f.write(f'[[token]]\nidentity = "{who}"\ntoken = "{tok}"\n\n')
    with open(os.path.join(tmp, "root.toml"), "w") as f:
        f.write(ROOT_CONFIG)
    port = {k: free_port() for k in ("root", "root_http", "leaf", "leaf_http", "orphan", "orphan_http", "dead")}
    addr = {k: f"127.0.0.1:{v}" for k, v in port.items()}
    ctx = ssl.create_default_context(cafile=os.path.join(tmp, "ca.pem"))
    url = {
        "root": f"https://{addr['root_http']}",
        "leaf": f"http://{addr['leaf_http']}",
        "orphan": f"http://{addr['orphan_http']}",
    }
    ctxs = {"root": ctx, "leaf": None, "orphan": None}

    servers = Servers(binary, tmp)
    try:
        servers.start("root", [
            "--config", "root.toml", "--listen", addr["root"], "--http", addr["root_http"],
            "--tls-cert", "server.pem", "--tls-key", "server.key", "--auth-tokens", "tokens.toml",
        ])
        servers.start("leaf", [
            "--parent", addr["root"], "--parent-tls-ca", "ca.pem", "--parent-token-file", "leaf.token",
            "--listen", addr["leaf"], "--http", addr["leaf_http"],
        ])
        servers.start("orphan", ["--parent", addr["dead"], "--listen", addr["orphan"], "--http", addr["orphan_http"]])
        for name in ("root", "leaf", "orphan"):
            wait_healthy(servers, name, url[name], ctxs[name])

        def get(what, server, *extra, expect_ok=True):
            cmd = [binary, "get", "--server", server, "--timeout", "3"] + list(extra)
            r = run(cmd, cwd=tmp)
            ok = r.returncode == 0
            note = "ok" if ok else (r.stderr.strip().splitlines() or ["failed"])[-1]
            flag = "" if expect_ok is None or ok == expect_ok else "   <-- unexpected"
            print(f"  {what}: {note}{flag}")

        root_tls = ["--tls-ca", "ca.pem"]
        print("driving the servers:")
        get("lease through the leaf", addr["leaf"], "--resource", "check/a", "--wants", "5")
        get("lease at the root", addr["root"], *root_tls, "--token-file", "client.token",
            "--resource", "check/b", "--wants", "3")
        get("acquire without an access rule (PermissionDenied)", addr["root"], *root_tls, "--token-file",
            "leaf.token", "--resource", "check/a", "--wants", "1", expect_ok=False)
        get("empty resource id (InvalidArgument)", addr["root"], *root_tls, "--token-file", "client.token",
            "--resource", "", "--wants", "1", expect_ok=False)
        get("lease at a leaf whose parent is down", addr["orphan"], "--resource", "check/a", "--wants", "1",
            expect_ok=None)
        body = os.path.join(tmp, "duplicate.bin")
        with open(body, "wb") as f:
            f.write(grpc_frame_duplicate_ids())
        r = run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "-m", "5",
                 "-H", "content-type: application/grpc", "-H", "te: trailers", "--data-binary", "@" + body,
                 f"http://{addr['leaf']}/doorman.Capacity/GetCapacity"])
        print(f"  bulk request with a repeated id (curl, HTTP/2): HTTP {r.stdout or r.stderr.strip()}")
        with socket.create_connection(("127.0.0.1", port["root"]), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                s.recv(1024)
            except OSError:
                pass
        print("  plaintext connection to the TLS gRPC port: sent")
        status, _ = http_get(url["root"] + "/metrics", ctx, token="not-a-known-token")
        print(f"  unknown bearer token on /metrics: HTTP {status}")
        status, _ = http_get(url["root"] + "/debug/status", ctx, token=tokens["client"])
        print(f"  status page without a read rule: HTTP {status}")
        later = time.time() + 5
        os.utime(os.path.join(tmp, "server.pem"), (later, later))
        print("  certificate file touched (re-read within --config-poll-interval, 1 s)")
        time.sleep(2.5)  # the certificate poll, the leaves' parent RPCs
        texts = {}
        for name in ("root", "leaf", "orphan"):
            status, text = http_get(url[name] + "/metrics", ctxs[name])
            if status != 200:
                raise RuntimeError(f"{name} /metrics: HTTP {status}: {text[:200]}")
            texts[name] = text
        return texts
    finally:
        servers.stop()
