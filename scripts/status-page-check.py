#!/usr/bin/env python3
"""The status page as a browser shows it: a three-level tree (root, parent,
leaf) on 127.0.0.1 from DOORMAN_BIN, one lease taken through the leaf, then
headless Chromium loads the leaf's and the root's /debug/status, the DOM it
renders is checked (level and role in the tree, election, parent link,
learning mode and the parent's lease per resource) and a screenshot of each
is kept in target/artefacts/ (status-leaf.png, status-root.png).

Fails (exit 1) with the servers' logs if a page lacks what it must show, if
Chromium is missing or if it writes no screenshot. Every server started
here binds 127.0.0.1 and is stopped by its pid.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from checklib import procs
from checklib.ports import free_port

BIN = os.environ.get("DOORMAN_BIN", "target/debug/doorman")
ART = os.path.join("target", "artefacts")
CONFIG = """
[[resources]]
identifier_glob = "db/*"
capacity = 100
description = "the status page check"
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 2
learning_mode_duration = 300
"""


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("status-page-check: no chromium binary (apt-get install -y chromium)")


def page(http, path):
    """The page's text, or why there is none (the server did not answer)."""
    return procs.http_get(f"http://{http}{path}")[1]


def browser(url, png):
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
           "--window-size=1400,900", "--hide-scrollbars"]
    dom = subprocess.run(cmd + ["--dump-dom", url], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    subprocess.run(cmd + [f"--screenshot={png}", url], capture_output=True,
                   timeout=60, check=True)
    if not os.path.exists(png) or os.path.getsize(png) < 5000:
        raise RuntimeError(f"no screenshot of {url} in {png}")
    return dom


def expect(dom, needles, where):
    missing = [n for n in needles if n not in dom]
    if missing:
        raise RuntimeError(f"{where} lacks {missing}:\n{dom[:3000]}")


def tree(tmp):
    cfg = os.path.join(tmp, "root.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    ports = {n: (free_port(), free_port()) for n in ("root", "parent", "leaf")}
    servers, parent = [], None
    for name in ("root", "parent", "leaf"):
        g, h = ports[name]
        args = ["--listen", f"127.0.0.1:{g}", "--http", f"127.0.0.1:{h}"]
        args += ["--config", cfg] if parent is None else ["--parent", parent]
        servers.append(procs.start([BIN, "server", *args], os.path.join(tmp, name + ".log")))
        parent = f"127.0.0.1:{g}"
    return servers, {n: (f"127.0.0.1:{g}", f"127.0.0.1:{h}") for n, (g, h) in ports.items()}


def check(addrs):
    leaf_grpc, leaf_http = addrs["leaf"]
    root_http = addrs["root"][1]
    for http in (addrs["root"][1], addrs["parent"][1], leaf_http):
        procs.wait_for(f"{http} up", lambda: page(http, "/healthz") == "ok\n", 20, 0.2)
    subprocess.run([BIN, "get", "--server", leaf_grpc, "--resource", "db/users",
                    "--wants", "10"], check=True, capture_output=True, timeout=30)
    # The leaf learns its level from its parent's answers, and the parent
    # its own from the root's: the first answer the leaf gets may come
    # before the parent has heard from the root, so wait for the level too.
    procs.wait_for("the leaf's lease from its parent and its level",
                   lambda: "parent lease" in page(leaf_http, "/debug/status")
                   and "Parent link: ok" in page(leaf_http, "/debug/status")
                   and "level <b>2</b>" in page(leaf_http, "/debug/status"), 20, 0.2)
    os.makedirs(ART, exist_ok=True)
    dom = browser(f"http://{leaf_http}/debug/status", os.path.join(ART, "status-leaf.png"))
    expect(dom, ["level <b>2</b>, intermediate", "this server is the master",
                 "session up", "Parent link: ok", "db/users", "parent lease"],
           "the leaf's page")
    dom = browser(f"http://{root_http}/debug/status", os.path.join(ART, "status-root.png"))
    expect(dom, ["level <b>0</b>, root", "learning (", "db/users",
                 "the status page check"], "the root's page")
    assert "Parent link" not in dom, "a root has no parent link"


def main():
    tmp = tempfile.mkdtemp(prefix="doorman-status-")
    servers, addrs = tree(tmp)
    try:
        check(addrs)
    except (RuntimeError, TimeoutError, AssertionError, subprocess.SubprocessError) as e:
        for p in servers:
            print(f"--- {p.log_path}\n{open(p.log_path).read()[-3000:]}", file=sys.stderr)
        print(f"status-page-check: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        procs.stop(*servers, grace=10)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"status-page-check: ok; screenshots in {ART}/status-leaf.png, status-root.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
