"""Ports for processes a check or test starts on 127.0.0.1, claimed so
that no other test process, Rust or Python, is given the same one.

Follows crates/doorman-testkit/src/ports.rs exactly: a port is taken from
20000 up to the kernel's first ephemeral port (32000 at most), where no
socket bound to port 0 lands, starting at an offset from the pid and the
time; it is claimed with an exclusive flock(2) on `<dir>/<port>.lock`
(dir: $DOORMAN_TEST_PORTS or /tmp/doorman-test-ports), which Rust's
File::try_lock also takes, and handed out only if binding 127.0.0.1:port
succeeds. The claim is kept until this process exits.

Must not: release a claim before the process ends (the locked files stay
open in _HELD), or hand out a port something listens on.
"""

import fcntl
import os
import socket
import time

FIRST = 20000   # the first port handed out
END = 32000     # one past the last, when the ephemeral range starts higher

_HELD = []      # the claims this process holds: their open files keep the locks


def free_port():
    """A port on 127.0.0.1 that nothing listens on now and that no other
    test process will be given while this one runs."""
    lock_dir = os.environ.get("DOORMAN_TEST_PORTS") or "/tmp/doorman-test-ports"
    _make_shared(lock_dir)
    end = min(END, _ephemeral_start() or END)
    if end <= FIRST:
        raise RuntimeError(f"no test ports: the kernel's ephemeral range starts at {end}, "
                           f"below {FIRST} (/proc/sys/net/ipv4/ip_local_port_range)")
    start = FIRST + _seed() % (end - FIRST)
    for port in list(range(start, end)) + list(range(FIRST, start)):
        if _claim(lock_dir, port):
            return port
    raise RuntimeError(f"no free port in {FIRST}..{end} (claims in {lock_dir})")


def free_ports(n):
    """n distinct ports, each as free_port() gives it."""
    return [free_port() for _ in range(n)]


def _claim(lock_dir, port):
    """Claims `port` if no other process holds it and nothing listens on it."""
    path = os.path.join(lock_dir, f"{port}.lock")
    try:
        f = open(path, "a")  # create, no truncate
    except OSError:
        try:
            f = open(path)  # another user's file: flock needs no write access
        except OSError:
            return False
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with socket.socket() as probe:
            # As Rust's TcpListener::bind, which the test kit probes with.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))
    except OSError:
        f.close()  # drops the lock, if it was taken
        return False
    _HELD.append(f)
    return True


def _make_shared(lock_dir):
    """Creates the claims' directory, writable by every user (sticky, as
    /tmp): a run as root and one as a user share it."""
    if not os.path.isdir(lock_dir):
        os.makedirs(lock_dir, exist_ok=True)
        try:
            os.chmod(lock_dir, 0o1777)
        except OSError:
            pass


def _ephemeral_start():
    """The kernel's first ephemeral port (Linux), or None."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _seed():
    """Where this process starts looking: spreads parallel processes apart."""
    return ((os.getpid() * 7919) & 0xFFFFFFFF) ^ (time.time_ns() % 1_000_000_000)


if __name__ == "__main__":
    # `python3 scripts/checklib/ports.py`: one port as free_port() gives it,
    # on stdout. Its claim ends with this process: a shell takes the claim
    # over with flock(1) on the same file (scripts/checklib/ports.sh).
    print(free_port())
