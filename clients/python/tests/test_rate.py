"""Rate resources against a real server: the rate held to the lease, with
wait() and try_acquire(), and what the handles report."""

import time

from conftest import wait_for_lease

import doorman_client
from doorman_client import Client


def test_wait_holds_the_granted_rate(server):
    with Client([server.addr]) as client:
        r = client.rate_resource("rate20/wait", wants=100.0)
        wait_for_lease(r)
        assert r.capacity == 20.0  # STATIC: what is asked, up to 20 each
        assert r.mode == "lease"
        r.wait()  # empties what the bucket gathered while the lease came
        count, start = 0, time.monotonic()
        while time.monotonic() - start < 3.0:
            r.wait()
            count += 1
        elapsed = time.monotonic() - start
        # The bucket allows 20/s with a burst of max(1, 0.1 s x 20) = 2 permits:
        # never more than that, and not much less on a loaded machine.
        assert count <= 20 * elapsed + 2 + 1, count
        assert count >= 0.85 * 20 * elapsed, count


def test_try_acquire_never_blocks_and_holds_the_rate(server):
    with Client([server.addr]) as client:
        r = client.rate_resource("rate20/try", wants=20.0)
        wait_for_lease(r)
        while r.try_acquire():  # the burst
            pass
        taken, calls, start = 0, 0, time.monotonic()
        while time.monotonic() - start < 2.0:
            calls += 1
            if r.try_acquire():
                taken += 1
            else:
                time.sleep(0.001)
        elapsed = time.monotonic() - start
        assert calls > taken
        assert 0.85 * 20 * elapsed <= taken <= 20 * elapsed + 2, taken


def test_weighted_waits_count_n_permits(server):
    with Client([server.addr]) as client:
        r = client.rate_resource("rate50/weighted", wants=50.0)
        wait_for_lease(r)
        r.wait(5)
        start = time.monotonic()
        for _ in range(10):
            r.wait(n=5)  # 50 permits at 50/s
        elapsed = time.monotonic() - start
        assert 0.85 <= elapsed <= 1.6, elapsed
        assert r.try_acquire(1) in (True, False)


def test_handles_share_one_resource_and_report_it(server):
    with Client([server.addr], client_id="py-test-report") as client:
        assert client.client_id == "py-test-report"
        a = client.rate_resource("rate20/shared", wants=7.0, priority=1)
        b = client.rate_resource("rate20/shared", wants=7.0)
        wait_for_lease(a)
        assert b.capacity == a.capacity == 7.0
        assert a.id == "rate20/shared"
        assert a.wants == 7.0
        assert a.note is None
        assert "rate20/shared" in repr(a)
        # A server answers a client's repeat request within 1 s of its
        # last with the lease held; past that, a change of more than 10 %
        # is sent at once (long before the 5 s refresh interval).
        time.sleep(1.2)
        a.set_wants(3.0)
        assert b.wants == 3.0
        start = time.monotonic()
        while b.capacity != 3.0 and time.monotonic() - start < 3.0:
            time.sleep(0.01)
        assert b.capacity == 3.0
        a.set_wants(None)  # estimated from use from now on
        assert isinstance(a.wants, float)


def test_note_carries_what_the_server_said(server):
    with Client([server.addr]) as client:
        r = client.rate_resource("learning/r", wants=5.0)
        deadline = time.monotonic() + 10
        while r.note is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert r.note is not None and "learning mode" in r.note, r.note


def test_version_and_exports():
    assert isinstance(doorman_client.__version__, str)
    for name in doorman_client.__all__:
        assert getattr(doorman_client, name) is not None
