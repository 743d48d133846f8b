"""Many Python threads waiting at once: the GIL is released while waiting."""

import threading
import time

from conftest import wait_for_lease

from doorman_client import Client, DeadlineExceeded


def run_threads(n, target):
    errors, results = [], []

    def wrapped(i):
        try:
            results.append(target(i))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return time.monotonic() - start, results, errors


def test_32_threads_time_out_together(dead_addr):
    """If a wait held the GIL, 32 waits of 1 s would take 32 s."""
    with Client([dead_addr], rpc_timeout=0.5) as client:
        r = client.rate_resource("threads/none", wants=1.0)
        progress = {"n": 0, "stop": False}

        def spin():  # Python code that must keep running meanwhile
            while not progress["stop"]:
                progress["n"] += 1
                time.sleep(0.001)

        spinner = threading.Thread(target=spin)
        spinner.start()

        def wait_one(i):
            try:
                r.wait(timeout=1.0)
            except DeadlineExceeded:
                return "timeout"
            return "permit"

        elapsed, results, errors = run_threads(32, wait_one)
        progress["stop"] = True
        spinner.join()
        assert not errors, errors
        assert results == ["timeout"] * 32
        assert elapsed < 3.0, elapsed
        assert progress["n"] > 100, progress


def test_32_threads_share_the_rate(server):
    with Client([server.addr]) as client:
        r = client.rate_resource("rate50/threads", wants=50.0)
        wait_for_lease(r)
        r.wait()

        def take_three(i):
            for _ in range(3):
                r.wait(timeout=30)
            return i

        elapsed, results, errors = run_threads(32, take_three)
        assert not errors, errors
        assert sorted(results) == list(range(32))
        # 96 permits at 50/s with a burst of 5: no faster than ~1.8 s.
        assert (96 - 5 - 1) / 50 <= elapsed <= 96 / 50 * 1.5 + 1, elapsed
