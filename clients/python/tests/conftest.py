"""Fixtures of the doorman_client tests: real `doorman server` processes on
free 127.0.0.1 ports (started from DOORMAN_BIN, default the workspace's
target/debug/doorman), stopped by pid at the end of the test or session.
Ports, starting, waiting and stopping come from scripts/checklib, shared
with the check scripts (and its ports with the Rust tests).

Must not: fake the server, or leave a process behind.
"""

import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
if str(REPO / "scripts") not in sys.path:
    sys.path.append(str(REPO / "scripts"))

from checklib import procs  # noqa: E402  (needs the scripts directory on sys.path)
from checklib.ports import free_port  # noqa: E402

# Every template grants at once (no learning mode). STATIC gives each client
# what it asks for, up to `capacity`, which makes the expected grant exact.
SHARED_CONFIG = """\
[[resources]]
identifier_glob = "rate20/*"
capacity = 20.0
[resources.algorithm]
kind = "STATIC"
lease_length = 60
refresh_interval = 5
learning_mode_duration = 0

[[resources]]
identifier_glob = "rate50/*"
capacity = 50.0
[resources.algorithm]
kind = "STATIC"
lease_length = 60
refresh_interval = 5
learning_mode_duration = 0

[[resources]]
identifier_glob = "gauge4/*"
capacity = 4.0
[resources.algorithm]
kind = "STATIC"
lease_length = 60
refresh_interval = 5
learning_mode_duration = 0

[[resources]]
identifier_glob = "zero/*"
capacity = 0.0
[resources.algorithm]
kind = "STATIC"
lease_length = 60
refresh_interval = 5
learning_mode_duration = 0

[[resources]]
identifier_glob = "learning/*"
capacity = 10.0
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 60
refresh_interval = 5
learning_mode_duration = 600

[[resources]]
identifier_glob = "fair10/*"
capacity = 10.0
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 60
refresh_interval = 20
learning_mode_duration = 0

[[resources]]
identifier_glob = "*"
capacity = 100.0
[resources.algorithm]
kind = "STATIC"
lease_length = 60
refresh_interval = 5
learning_mode_duration = 0
"""

# Short leases, so that a dead server's leases run out within a test.
SHORT_LEASE_CONFIG = """\
[[resources]]
identifier_glob = "*"
capacity = 5.0
safe_capacity = 2.0
[resources.algorithm]
kind = "STATIC"
lease_length = 2
refresh_interval = 1
learning_mode_duration = 0
"""


def doorman_bin():
    path = Path(os.environ.get("DOORMAN_BIN") or REPO / "target" / "debug" / "doorman")
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.exit(
            f"doorman binary not found at {path}: build it (cargo build --bin doorman) "
            "or set DOORMAN_BIN",
            returncode=2,
        )
    return str(path)


class Server:
    """One `doorman server` process with its own config, ports and log."""

    def __init__(self, tmp: Path, name: str, config: str, files=None, args=(), addr=None):
        """files: more files for its directory (name: text); args: more
        arguments of `doorman server`; addr: its gRPC address (default a
        free port)."""
        self.dir = tmp / name
        self.dir.mkdir(parents=True)
        (self.dir / "doorman.toml").write_text(config)
        for fname, text in (files or {}).items():
            (self.dir / fname).write_text(text)
        self.addr = addr or f"127.0.0.1:{free_port()}"
        self.http = f"127.0.0.1:{free_port()}"
        self.log_path = self.dir / "server.log"
        args = [
            doorman_bin(), "server", "--config", "doorman.toml",
            "--listen", self.addr, "--http", self.http, *args,
        ]
        self.proc = procs.start(args, self.log_path, cwd=self.dir)
        healthy = lambda: procs.http_ok(f"http://{self.http}/healthz")  # noqa: E731
        try:
            procs.wait_up(self.proc, "doorman server", healthy, timeout=30, interval=0.05)
        except RuntimeError:
            self.stop()
            raise

    def kill(self):
        """Dies at once (SIGKILL): nothing is released, nothing answers."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        procs.stop(self.proc)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """A server shared by the tests that do not kill it (see SHARED_CONFIG)."""
    s = Server(tmp_path_factory.mktemp("shared"), "shared", SHARED_CONFIG)
    yield s
    s.stop()


@pytest.fixture
def short_lease_server(tmp_path):
    """A server of this test alone, with 2 s leases: safe to kill."""
    s = Server(tmp_path, "short", SHORT_LEASE_CONFIG)
    yield s
    s.stop()


@pytest.fixture
def dead_addr():
    """An address where nothing listens."""
    return f"127.0.0.1:{free_port()}"


def wait_until(predicate, seconds=10.0, what="condition"):
    """Until predicate() returns a true value that is not a string (a
    string says why not); TimeoutError naming `what` after `seconds`."""
    procs.wait_for(what, predicate, timeout=seconds, interval=0.02)


def wait_for_lease(resource, seconds=10.0):
    """Until the servers granted the resource a lease with capacity."""
    wait_until(
        lambda: (resource.mode == "lease" and resource.capacity > 0)
        or f"mode {resource.mode}, capacity {resource.capacity}, note {resource.note!r}",
        seconds,
        f"a lease for {resource.id}",
    )
