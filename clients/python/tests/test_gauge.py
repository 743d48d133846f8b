"""Gauge resources against a real server: concurrency bounded by the
capacity across threads, permits as context managers, try_mark."""

import threading
import time

from conftest import wait_for_lease

from doorman_client import Client


def test_threads_in_flight_never_exceed_capacity(server):
    with Client([server.addr]) as client:
        g = client.gauge_resource("gauge4/threads", wants=10.0)
        wait_for_lease(g)
        assert g.capacity == 4.0
        lock = threading.Lock()
        now = {"in": 0, "max": 0, "done": 0}
        errors = []

        def worker():
            try:
                for _ in range(5):
                    with g.mark(timeout=20):
                        with lock:
                            now["in"] += 1
                            now["max"] = max(now["max"], now["in"])
                        time.sleep(0.05)
                        with lock:
                            now["in"] -= 1
                            now["done"] += 1
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=worker) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert now["done"] == 60
        assert now["max"] <= 4, now
        assert now["max"] >= 3, now  # the threads really ran side by side
        assert g.in_flight == 0


def test_try_mark_and_release(server):
    with Client([server.addr]) as client:
        g = client.gauge_resource("gauge4/try", wants=4.0)
        wait_for_lease(g)
        permits = [g.try_mark() for _ in range(4)]
        assert all(p is not None for p in permits)
        assert g.in_flight == 4
        assert g.try_mark() is None
        permits[0].release()
        assert permits[0].released
        permits[0].release()  # again: nothing
        assert g.in_flight == 3
        p = g.try_mark()
        assert p is not None and not p.released
        with p:
            assert g.in_flight == 4
        assert p.released
        del permits
        assert g.in_flight == 0  # dropping a permit releases it
        with g.mark(timeout=1.0) as held:
            assert not held.released
            assert g.in_flight == 1
        assert "in_flight=0" in repr(g)


def test_mark_waits_for_a_release(server):
    with Client([server.addr]) as client:
        g = client.gauge_resource("gauge4/handoff", wants=4.0)
        wait_for_lease(g)
        held = [g.mark(timeout=1.0) for _ in range(4)]
        threading.Timer(0.3, held[0].release).start()
        start = time.monotonic()
        with g.mark(timeout=5.0):
            elapsed = time.monotonic() - start
        assert 0.25 <= elapsed <= 2.0, elapsed
