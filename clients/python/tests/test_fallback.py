"""When the server dies: the lease runs out and the client's fallback
applies (pessimistic: 0; optimistic: what it wants; safe: the server's safe
capacity). The server here has 2 s leases and is killed with SIGKILL."""

import time

import pytest
from conftest import wait_for_lease, wait_until

from doorman_client import Client, DeadlineExceeded


def lose_lease(server, resource):
    wait_for_lease(resource)
    assert resource.capacity == 5.0
    server.kill()
    start = time.monotonic()
    wait_until(lambda: resource.mode != "lease", 10, f"{resource.id} losing its lease")
    # The lease is 2 s long; it cannot have run out long before that.
    return time.monotonic() - start


def test_pessimistic_falls_to_zero(short_lease_server):
    with Client([short_lease_server.addr], fallback="pessimistic", rpc_timeout=1.0) as client:
        r = client.rate_resource("fallback/pessimistic", wants=7.0)
        g = client.gauge_resource("fallback/pessimistic-gauge", wants=3.0)
        wait_for_lease(g)
        lost_after = lose_lease(short_lease_server, r)
        assert lost_after <= 4.0, lost_after
        assert r.mode == "pessimistic"
        assert r.capacity == 0.0
        with pytest.raises(DeadlineExceeded):
            r.wait(timeout=0.2)
        wait_until(lambda: g.mode == "pessimistic", 5, "the gauge losing its lease")
        assert g.capacity == 0.0
        assert g.try_mark() is None


def test_optimistic_takes_what_it_wants(short_lease_server):
    with Client([short_lease_server.addr], fallback="optimistic", rpc_timeout=1.0) as client:
        r = client.rate_resource("fallback/optimistic", wants=7.0)
        lose_lease(short_lease_server, r)
        assert r.mode == "optimistic"
        assert r.capacity == 7.0  # wants, not the 5 granted
        r.wait(timeout=1.0)


def test_safe_uses_the_servers_safe_capacity(short_lease_server):
    with Client([short_lease_server.addr], fallback=("safe", 1.0), rpc_timeout=1.0) as client:
        r = client.rate_resource("fallback/safe", wants=7.0)
        lose_lease(short_lease_server, r)
        assert r.mode == "safe"
        assert r.capacity == 2.0  # safe_capacity from the server, not the default 1


def test_no_server_at_all(dead_addr):
    with Client([dead_addr], fallback=("safe", 3.0), rpc_timeout=0.5) as client:
        r = client.rate_resource("nobody/home", wants=7.0)
        wait_until(lambda: r.mode == "safe", 5, "the safe fallback")
        assert r.capacity == 3.0  # never a safe capacity from a server: the default
