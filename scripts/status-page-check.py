#!/usr/bin/env python3
"""The status page as a browser shows it: a three-level tree (root, parent,
two leaves) on 127.0.0.1 from DOORMAN_BIN, a lease taken through each leaf,
then headless Chromium loads the leaf's and the root's /debug/status, the
DOM it renders is checked (level and role in the tree, election, parent
link, learning mode and the parent's lease per resource; on the root, the
tree below it drawn with every node, refreshed live) and a screenshot of
each is kept in target/artefacts/ (status-leaf.png, status-root.png).
`doorman tree` against the root must draw the same three levels.

Fails (exit 1) with the servers' logs if a page lacks what it must show, if
Chromium is missing or if it writes no screenshot. Every server started
here binds 127.0.0.1 and is stopped by its pid.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

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

[[resources]]
identifier_glob = "api/*"
capacity = 60
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 30
refresh_interval = 2
learning_mode_duration = 0
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
    names = ("root", "parent", "leaf", "leaf-b")
    ports = {n: (free_port(), free_port()) for n in names}
    parents = {"root": None, "parent": "root", "leaf": "parent", "leaf-b": "parent"}
    servers = []
    for name in names:
        g, h = ports[name]
        args = ["--listen", f"127.0.0.1:{g}", "--http", f"127.0.0.1:{h}"]
        up = parents[name]
        args += ["--config", cfg] if up is None else ["--parent", f"127.0.0.1:{ports[up][0]}"]
        servers.append(procs.start([BIN, "server", *args], os.path.join(tmp, name + ".log")))
    return servers, {n: (f"127.0.0.1:{g}", f"127.0.0.1:{h}") for n, (g, h) in ports.items()}


def tree_text(root_http):
    """`doorman tree` against the root: its exit code and text."""
    r = subprocess.run([BIN, "tree", "--http", root_http], capture_output=True,
                       text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


def whole_tree(root_http, addrs):
    """The root's tree holds both leaves at level 2, fresh (exit 0)."""
    code, text = tree_text(root_http)
    leaves = [addrs[n][0] for n in ("leaf", "leaf-b")]
    return code == 0 and all(f"{a} · level 2 · fresh" in text for a in leaves) or text


def check(addrs):
    leaf_http = addrs["leaf"][1]
    root_http = addrs["root"][1]
    for http in (addrs[n][1] for n in ("root", "parent", "leaf", "leaf-b")):
        procs.wait_for(f"{http} up", lambda: page(http, "/healthz") == "ok\n", 20, 0.2)
    asks = (("leaf", "db/users", "10"), ("leaf-b", "db/users", "25"),
            ("leaf", "api/search", "50"), ("leaf-b", "api/search", "20"))
    # Twice: a leaf's first answer comes before it has heard from its
    # parent (capacity 0, a lease that ends at once); the second holds.
    for _ in range(2):
        for leaf, resource, wants in asks:
            subprocess.run([BIN, "get", "--server", addrs[leaf][0], "--resource", resource,
                            "--wants", wants], check=True, capture_output=True, timeout=30)
        time.sleep(2)
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
    procs.wait_for("the whole tree at the root (doorman tree)",
                   lambda: whole_tree(root_http, addrs), 30, 0.5)
    dom = browser(f"http://{root_http}/debug/status", os.path.join(ART, "status-root.png"))
    nodes = [f"<b>{addrs[n][0]}</b> · level {lvl} · fresh"
             for n, lvl in (("parent", 1), ("leaf", 2), ("leaf-b", 2))]
    expect(dom, ["level <b>0</b>, root", "learning (", "db/users",
                 "the status page check", "The tree below", "<ul class=\"tree\">",
                 "fetch('/debug/tree')", *nodes], "the root's page")
    assert "Parent link" not in dom, "a root has no parent link"
    nested = dom.index(nodes[0]) < dom.index(nodes[1]) and dom.count("<ul") >= 3
    assert nested, f"the leaves are not drawn below the parent:\n{dom[:3000]}"
    print(tree_text(root_http)[1])


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
