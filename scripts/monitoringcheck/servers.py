"""Real Doorman servers on 127.0.0.1 for the metric-name check: free
ports, the root's config, a CA and server certificate (openssl), a gRPC
frame with a repeated id, starting and stopping servers by pid, HTTP GET
and waiting for /healthz.

Must not decide what to drive or what to compare (scrape, cli), and must
not stop a process it did not start.
"""

import os
import signal
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ROOT_CONFIG = """\
[[resources]]
identifier_glob = "check/*"
capacity = 100.0
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 60
refresh_interval = 5

[[access]]
identities = ["leaf"]
actions = ["serve"]

[[access]]
identities = ["client"]
actions = ["acquire"]
"""


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_tls(tmp):
    """A CA and a server certificate for 127.0.0.1, signed by it."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=check-ca", cwd=tmp)
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=root", cwd=tmp)
    with open(os.path.join(tmp, "ext.cnf"), "w") as f:
        f.write(
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
            "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
        )
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=tmp,
    )


def grpc_frame_duplicate_ids():
    """A GetCapacity request (gRPC frame) asking twice for check/dup: one entry is left out."""

    def field(num, payload):
        return bytes([num << 3 | 2, len(payload)]) + payload

    def entry(rid, wants):
        return field(1, rid) + bytes([2 << 3, 0]) + bytes([4 << 3 | 1]) + struct.pack("<d", wants)

    msg = field(1, b"check-monitoring") + field(2, entry(b"check/dup", 1.0)) + field(2, entry(b"check/dup", 2.0))
    return b"\x00" + struct.pack(">I", len(msg)) + msg


class Servers:
    def __init__(self, binary, tmp):
        self.bin, self.tmp, self.procs = binary, tmp, {}

    def start(self, name, args):
        log = open(os.path.join(self.tmp, f"{name}.log"), "w")
        p = subprocess.Popen([self.bin, "server"] + args, stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp)
        self.procs[name] = p

    def log_tail(self, name, n=20):
        with open(os.path.join(self.tmp, f"{name}.log"), errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.time() + 5
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def http_get(url, ctx=None, token=None, timeout=5):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def wait_healthy(servers, name, url, ctx=None, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if servers.procs[name].poll() is not None:
            raise RuntimeError(f"{name} exited:\n{servers.log_tail(name)}")
        try:
            if http_get(url + "/healthz", ctx, timeout=1)[0] == 200:
                return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{name} not healthy after {seconds} s:\n{servers.log_tail(name)}")
