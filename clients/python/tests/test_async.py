"""The asyncio variants: wait_async, mark_async, timeouts, cancellation and
the async context manager."""

import asyncio
import time

import pytest
from conftest import wait_for_lease

from doorman_client import Client, ClientClosed, DeadlineExceeded


def test_wait_async_on_many_tasks(server):
    async def main():
        async with Client([server.addr]) as client:
            r = client.rate_resource("rate20/async", wants=20.0)
            wait_for_lease(r)
            await r.wait_async()
            done = []

            async def task(i):
                for _ in range(5):
                    await r.wait_async(timeout=30)
                done.append(i)

            start = time.monotonic()
            await asyncio.gather(*(task(i) for i in range(8)))
            elapsed = time.monotonic() - start
            assert sorted(done) == list(range(8))
            # 40 permits at 20/s, burst 2.
            assert (40 - 2 - 1) / 20 <= elapsed <= 40 / 20 * 1.5 + 1, elapsed
        assert client.closed

    asyncio.run(main())


def test_async_timeouts_and_gauge(server):
    async def main():
        with Client([server.addr]) as client:
            zero = client.rate_resource("zero/async", wants=5.0)
            g = client.gauge_resource("gauge4/async", wants=4.0)
            wait_for_lease(g)
            start = time.monotonic()
            with pytest.raises(DeadlineExceeded):
                await zero.wait_async(timeout=0.2)
            assert 0.19 <= time.monotonic() - start <= 0.7

            permits = await asyncio.gather(*(g.mark_async(timeout=5) for _ in range(4)))
            assert g.in_flight == 4
            with pytest.raises(TimeoutError):
                await g.mark_async(timeout=0.2)
            assert g.in_flight == 4

            # A cancelled mark takes nothing.
            pending = asyncio.ensure_future(g.mark_async())
            await asyncio.sleep(0.1)
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
            permits[0].release()
            await asyncio.sleep(0.1)
            assert g.in_flight == 3
            with await g.mark_async(timeout=1) as p:
                assert g.in_flight == 4
            assert p.released
            del permits
            assert g.in_flight == 0

    asyncio.run(main())


def test_close_async_wakes_async_waiters(dead_addr):
    async def main():
        client = Client([dead_addr], rpc_timeout=0.5)
        r = client.rate_resource("closing/async", wants=1.0)
        waiter = asyncio.ensure_future(r.wait_async())
        await asyncio.sleep(0.2)
        await client.close_async()
        with pytest.raises(ClientClosed):
            await waiter
        with pytest.raises(ClientClosed):
            await r.wait_async()

    asyncio.run(main())
