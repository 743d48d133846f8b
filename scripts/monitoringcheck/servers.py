"""Real Doorman servers on 127.0.0.1 for the metric-name check: the root's
config, a CA and server certificate (doorman-pki), a gRPC frame with a
repeated id, starting and stopping servers by pid, HTTP GET with a bearer
token and waiting for /healthz (ports, processes and waiting come from
scripts/checklib).

Must not decide what to drive or what to compare (scrape, cli), and must
not stop a process it did not start.
"""

import os
import struct
import subprocess

from checklib import procs


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


def make_tls(binary, tmp):
    """A CA (ca.pem) and a certificate for 127.0.0.1 signed by it (server.pem,
    server.key), from the project's one throwaway CA: the doorman-pki
    binary beside `binary` (or $DOORMAN_PKI_BIN)."""
    pki = os.environ.get("DOORMAN_PKI_BIN") or os.path.join(os.path.dirname(binary), "doorman-pki")
    if not os.path.exists(pki):
        raise RuntimeError(f"{pki} not found: cargo build --release -p doorman-pki (or set DOORMAN_PKI_BIN)")
    subprocess.run([pki, tmp, "server"], check=True, capture_output=True)


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
        log = os.path.join(self.tmp, f"{name}.log")
        self.procs[name] = procs.start([self.bin, "server"] + args, log, cwd=self.tmp)

    def stop(self):
        procs.stop(*self.procs.values())


def http_get(url, ctx=None, token=None, timeout=5):
    """(status, body); status None if the server did not answer."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return procs.http_get(url, timeout=timeout, ctx=ctx, headers=headers)


def wait_healthy(servers, name, url, ctx=None, seconds=30):
    procs.wait_up(servers.procs[name], name, lambda: procs.http_ok(url + "/healthz", ctx), seconds)
