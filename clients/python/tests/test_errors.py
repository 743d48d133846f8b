"""Timeouts, closing, and refused arguments: the exception hierarchy."""

import subprocess
import sys
import threading
import time

import pytest
from conftest import wait_for_lease, wait_until

from doorman_client import (
    Client,
    ClientClosed,
    ConfigError,
    DeadlineExceeded,
    DoormanError,
    InvalidArgument,
)


def test_hierarchy():
    assert issubclass(DeadlineExceeded, DoormanError)
    assert issubclass(DeadlineExceeded, TimeoutError)
    assert issubclass(InvalidArgument, ValueError)
    assert issubclass(InvalidArgument, DoormanError)
    assert issubclass(ClientClosed, DoormanError)
    assert issubclass(ConfigError, DoormanError)


def test_wait_on_zero_capacity_times_out(server):
    with Client([server.addr]) as client:
        r = client.rate_resource("zero/r", wants=10.0)
        g = client.gauge_resource("zero/g", wants=10.0)
        wait_until(lambda: r.mode == "lease" and g.mode == "lease", 10, "a lease of 0")
        assert r.capacity == 0.0 and g.capacity == 0.0
        for call in (lambda: r.wait(timeout=0.2), lambda: g.mark(timeout=0.2)):
            start = time.monotonic()
            with pytest.raises(DeadlineExceeded) as e:
                call()
            elapsed = time.monotonic() - start
            assert 0.19 <= elapsed <= 0.7, elapsed
            assert isinstance(e.value, TimeoutError)
            assert "0.200 s" in str(e.value)
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            r.wait(timeout=0)
        assert time.monotonic() - start < 0.1
        assert not r.try_acquire()
        assert g.try_mark() is None
        assert g.in_flight == 0  # a timed-out mark took nothing


def test_timeout_zero_takes_what_is_there(server):
    with Client([server.addr]) as client:
        r = client.rate_resource("rate20/zero-timeout", wants=20.0)
        wait_for_lease(r)
        time.sleep(0.2)  # the burst fills up
        r.wait(timeout=0)


def test_close_wakes_waiters_and_refuses_calls(dead_addr):
    client = Client([dead_addr], rpc_timeout=0.5)
    r = client.rate_resource("closing/r", wants=1.0)
    g = client.gauge_resource("closing/g", wants=1.0)
    raised = []

    def waiter(call):
        try:
            call()
        except BaseException as e:
            raised.append(e)

    threads = [
        threading.Thread(target=waiter, args=(r.wait,)),
        threading.Thread(target=waiter, args=(g.mark,)),
    ]
    for t in threads:
        t.start()
    time.sleep(0.3)
    start = time.monotonic()
    client.close()
    for t in threads:
        t.join(5)
    assert time.monotonic() - start < 2.5  # rpc_timeout + 1 s at most
    assert len(raised) == 2 and all(isinstance(e, ClientClosed) for e in raised), raised
    assert client.closed
    for call in (
        r.wait,
        g.mark,
        r.try_acquire,
        g.try_mark,
        lambda: client.rate_resource("closing/other"),
    ):
        with pytest.raises(ClientClosed):
            call()
    client.close()  # again: nothing
    assert "closed" in repr(client)


def test_context_manager_closes(dead_addr):
    with Client([dead_addr]) as client:
        assert not client.closed
    assert client.closed


def test_refused_arguments(dead_addr, tmp_path):
    bad_clients = [
        dict(servers=[]),
        dict(servers=[dead_addr], fallback="sometimes"),
        dict(servers=[dead_addr], fallback=("safe",)),
        dict(servers=[dead_addr], fallback=("safe", -1.0)),
        dict(servers=[dead_addr], rpc_timeout=-1),
        dict(servers=[dead_addr], client_id=""),
        dict(servers=[dead_addr], token="has space"),
        dict(servers=[dead_addr], tls_cert="c.pem", tls_key="k.pem"),
    ]
    for kwargs in bad_clients:
        with pytest.raises(InvalidArgument):
            Client(**kwargs)
    with pytest.raises(ConfigError) as e:
        Client([dead_addr], tls_ca=tmp_path / "missing.pem")
    assert "missing.pem" in str(e.value)
    with Client([dead_addr]) as client:
        r = client.rate_resource("args/r")
        for call in (
            lambda: client.rate_resource(""),
            lambda: client.rate_resource("args/bad", wants=-1.0),
            lambda: client.rate_resource("args/bad", wants=float("nan")),
            lambda: client.gauge_resource("args/r"),  # open as a rate resource
            lambda: r.wait(0),
            lambda: r.wait(1, timeout=-0.1),
            lambda: r.wait(1, timeout=float("inf")),
            lambda: r.try_acquire(-3),
            lambda: r.set_wants(-1.0),
        ):
            with pytest.raises(ValueError):
                call()


# Python raises KeyboardInterrupt only if SIGINT was not ignored when it
# started; a job started in the background by a non-interactive shell
# (`cmd &`) inherits it ignored, and the test would hang. The script sets
# Python's own handler, as an interactive program has it.
CTRL_C = """
import os, signal, sys, threading, time
from doorman_client import Client
signal.signal(signal.SIGINT, signal.default_int_handler)
with Client([sys.argv[1]], rpc_timeout=0.5) as client:
    r = client.rate_resource("ctrl-c/r", wants=1.0)
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        r.wait()  # no timeout, no capacity
    except KeyboardInterrupt:
        print("interrupted after %.2f s" % (time.monotonic() - start))
"""


def test_ctrl_c_interrupts_a_blocking_wait(dead_addr):
    out = subprocess.run(
        [sys.executable, "-c", CTRL_C, dead_addr], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("interrupted after 0."), out.stdout
