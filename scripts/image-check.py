#!/usr/bin/env python3
"""Run the doorman container image as users run it, and check it.

  python3 scripts/image-check.py IMAGE     # podman on PATH, set up by scripts/image.sh

What it checks, each a line "ok: ..." or "FAILED: ...":
  * the image: at most MAX_IMAGE_MB (40) MB uncompressed; user 10001:10001;
    `doorman --version` in it says the version of its label
    org.opencontainers.image.version; no shell (/bin/sh cannot start);
  * a root with a mounted config, electing through a real etcd on
    127.0.0.1 (Debian's etcd), and a leaf below it, each started with
    `podman run --read-only --user 10001 --network host`: both answer
    /readyz; `doorman get` (run from the image too) takes a lease through
    the leaf; /metrics of both scrape and count the lease;
  * `podman stop` of each: the server (PID 1 of its container) exits with
    status 0 on SIGTERM within 2 s, and the root releases its election at
    once (its key under /doorman/root/ is gone from etcd when stop returns).

Everything binds 127.0.0.1; every container and the etcd it started are
removed or stopped by this script (by name and pid), pass or fail. The
last line is "N passed, M failed"; the exit status is 1 if any failed.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from checklib import procs
from checklib.ports import free_ports

MAX_IMAGE_MB = 40
STOP_WITHIN_S = 2.0
ROOT_CONFIG = """
[[resources]]
identifier_glob = "images/*"
capacity = 100
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 20
refresh_interval = 2
learning_mode_duration = 0
"""

results = {"passed": 0, "failed": 0}


def check(what, ok, detail=""):
    if ok:
        results["passed"] += 1
        print(f"ok: {what}")
    else:
        results["failed"] += 1
        print(f"FAILED: {what}{': ' + detail if detail else ''}")
    return ok


def run(*argv, check_rc=True, timeout=60):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check_rc and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()}")
    return p


def http(url, body=None, timeout=2.0):
    """(status, text); a JSON body is POSTed; status None if no answer."""
    data = None if body is None else json.dumps(body).encode()
    return procs.http_get(url, timeout=timeout, data=data)


def wait_for(what, probe, timeout=30.0):
    """True once probe() is; else a failed check (why in its detail) and False."""
    try:
        return procs.wait_for(what, probe, timeout=timeout, interval=0.2)
    except TimeoutError as e:
        return check(what, False, str(e).removeprefix(f"{what}: "))


class Etcd:
    def __init__(self, tmp):
        self.client, peer = free_ports(2)
        binary = os.environ.get("ETCD_BIN") or shutil.which("etcd") or "/usr/bin/etcd"
        self.proc = procs.start(
            [binary, "--data-dir", os.path.join(tmp, "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{self.client}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.client}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
            os.path.join(tmp, "etcd.log"))

    def keys(self, prefix):
        """Keys under prefix, through etcd's JSON gateway (3.4: /v3/kv/range)."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
        status, body = http(f"http://127.0.0.1:{self.client}/v3/kv/range",
                            {"key": b64(prefix), "range_end": b64(end), "keys_only": True})
        if status != 200:
            return None
        return [base64.b64decode(kv["key"]).decode() for kv in json.loads(body).get("kvs", [])]

    def stop(self):
        procs.stop(self.proc, grace=10)


class Container:
    """One `podman run -d` of the image; removed by name in `remove`."""

    def __init__(self, image, name, args, volumes=()):
        self.name = name
        run("podman", "rm", "-f", "--ignore", name)
        vols = [a for v in volumes for a in ("-v", v)]
        run("podman", "run", "-d", "--name", name, "--read-only", "--user", "10001",
            "--network", "host", *vols, image, *args)

    def state(self):
        p = run("podman", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}",
                self.name, check_rc=False)
        return p.stdout.strip()

    def logs(self):
        return run("podman", "logs", self.name, check_rc=False).stderr[-3000:]

    def stop(self):
        """Seconds `podman stop` took, and the exit code of the server."""
        t = time.monotonic()
        run("podman", "stop", "-t", "10", self.name, timeout=30)
        took = time.monotonic() - t
        status, code = self.state().split()
        return took, status, int(code)

    def remove(self):
        run("podman", "rm", "-f", "--ignore", self.name, check_rc=False)


def check_image(image):
    inspect = json.loads(run("podman", "image", "inspect", image).stdout)[0]
    size_mb = inspect["Size"] / 1e6
    check(f"image size {size_mb:.1f} MB <= {MAX_IMAGE_MB} MB", size_mb <= MAX_IMAGE_MB)
    config = inspect.get("Config", {})
    check("image user is 10001:10001", config.get("User") == "10001:10001", config.get("User"))
    label = config.get("Labels", {}).get("org.opencontainers.image.version")
    version = run("podman", "run", "--rm", "--read-only", image, "--version").stdout.strip()
    check(f"`doorman --version` in the image ({version}) matches its label ({label})",
          label is not None and version == f"doorman {label}")
    sh = run("podman", "run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "true",
             check_rc=False)
    check("no shell in the image (/bin/sh does not start)", sh.returncode != 0)
    return size_mb


def metric(text, name, template):
    m = re.search(rf'(?m)^{name}{{template="{re.escape(template)}"}} (\S+)$', text)
    return float(m.group(1)) if m else None


def ready(port):
    return lambda: procs.http_ok(f"http://127.0.0.1:{port}/readyz", timeout=2.0)


def serve_and_stop(image, tmp):
    etcd = Etcd(tmp)
    containers = []
    try:
        wait_for("etcd answers", lambda: etcd.keys("/doorman/") is not None or "no answer")
        conf = os.path.join(tmp, "conf")
        os.makedirs(conf)
        with open(os.path.join(conf, "config.toml"), "w") as f:
            f.write(ROOT_CONFIG)
        os.chmod(conf, 0o755)
        rg, rh, lg, lh = free_ports(4)
        root = Container(image, "doorman-image-root", [
            "server", "--config", "/etc/doorman/config.toml", "--listen", f"127.0.0.1:{rg}",
            "--http", f"127.0.0.1:{rh}", "--etcd", f"127.0.0.1:{etcd.client}",
            "--election-key", "/doorman/root", "--election-ttl", "10"],
            volumes=[f"{conf}:/etc/doorman:ro"])
        containers.append(root)
        leaf = Container(image, "doorman-image-leaf", [
            "server", "--parent", f"127.0.0.1:{rg}", "--listen", f"127.0.0.1:{lg}",
            "--http", f"127.0.0.1:{lh}"])
        containers.append(leaf)
        if not (wait_for("root ready (master through etcd)", ready(rh))
                and wait_for("leaf ready", ready(lh))):
            for c in containers:
                print(f"--- {c.name} ({c.state()}):\n{c.logs()}")
            return
        check("root and leaf ready (/readyz 200)", True)
        # The leaf asks its parent for the resource at the first request
        # and answers 0 until it holds a lease: ask again, as a client does.
        got = {}

        def lease():
            p = run("podman", "run", "--rm", "--read-only", "--user", "10001", "--network",
                    "host", image, "get", "--server", f"127.0.0.1:{lg}", "--resource",
                    "images/a", "--wants", "30", "--client-id", "image-check", check_rc=False)
            got["out"] = (p.stdout + p.stderr).strip()
            m = re.search(r"(?m)^capacity\s+([0-9.]+)", got["out"])
            return (p.returncode == 0 and m is not None and float(m.group(1)) == 30.0) or "no"
        if wait_for("`doorman get` through the leaf gets 30 of images/a", lease, timeout=20):
            check("`doorman get` through the leaf gets 30 of images/a", True)
        else:
            print(got.get("out", ""))
        for name, port, template in (("root", rh, "images/*"), ("leaf", lh, "(from parent)")):
            status, body = http(f"http://127.0.0.1:{port}/metrics")
            has = metric(body or "", "doorman_server_resource_has", template)
            check(f"/metrics of the {name}: the lease counted in "
                  f'doorman_server_resource_has{{template="{template}"}}',
                  status == 200 and "doorman_build_info" in body and has is not None
                  and has >= 30, f"status {status}, has {has}")
        keys = etcd.keys("/doorman/root/")
        check("the root holds its election key", bool(keys), str(keys))
        for c in (leaf, root):
            took, status, code = c.stop()
            check(f"{c.name}: exited {code} on SIGTERM in {took:.2f} s (<= {STOP_WITHIN_S} s)",
                  status == "exited" and code == 0 and took <= STOP_WITHIN_S, c.logs()[-800:])
        keys = etcd.keys("/doorman/root/")
        check("the root's election key is released when it stops", keys == [], str(keys))
    finally:
        for c in containers:
            c.remove()
        etcd.stop()


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    image = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="image-check-", dir=os.environ.get("TMPDIR"))
    try:
        check_image(image)
        serve_and_stop(image, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
