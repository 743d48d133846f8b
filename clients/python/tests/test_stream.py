"""The lease stream from Python: a holder of the whole capacity (FAIR_SHARE
of 10, refreshed every 20 s) and a newcomer. On the stream the server
pushes the holder its half, the holder acknowledges, and the newcomer is
pushed what was freed, long before any refresh; polling
(lease_stream=False), the newcomer waits for the holder's refresh."""

import time

from conftest import wait_for_lease

from doorman_client import Client


def newcomer_served_within(server, resource, stream, seconds):
    """Whether the newcomer held its half within `seconds`; the two never
    hold more than 10 together meanwhile."""
    with Client([server.addr], lease_stream=stream) as ca, Client(
        [server.addr], lease_stream=stream
    ) as cb:
        a = ca.rate_resource(resource, wants=10.0)
        wait_for_lease(a)
        assert a.capacity == 10.0
        b = cb.rate_resource(resource, wants=10.0)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            held = [r.capacity if r.mode == "lease" else 0.0 for r in (a, b)]
            assert sum(held) <= 10.0 + 1e-9, held
            if held[1] >= 5.0 - 1e-9:
                return True
            time.sleep(0.005)
        return False


def test_a_newcomer_is_pushed_its_share_on_the_stream(server):
    assert newcomer_served_within(server, "fair10/push", True, 3.0)


def test_polling_the_newcomer_waits_for_the_holders_refresh(server):
    assert not newcomer_served_within(server, "fair10/poll", False, 3.0)
