"""Shadow mode through a real server: a resource whose template says
`shadow = true` never waits or refuses, and counts what it would have
refused; a config push turning shadow off makes it enforce again."""

import time

from conftest import Server, wait_for_lease, wait_until

from doorman_client import Client

SHADOW_CONFIG = """\
[[resources]]
identifier_glob = "*"
capacity = 2.0
shadow = {shadow}
[resources.algorithm]
kind = "STATIC"
lease_length = 60
refresh_interval = 1
learning_mode_duration = 0
"""


def test_shadow_counts_what_it_would_refuse_until_a_push_turns_it_off(tmp_path):
    s = Server(tmp_path, "shadow", SHADOW_CONFIG.format(shadow="true"))
    try:
        with Client([s.addr]) as client:
            rate = client.rate_resource("db/shadowed", wants=2.0)
            gauge = client.gauge_resource("pool/shadowed", wants=2.0)
            wait_for_lease(rate)
            wait_for_lease(gauge)
            assert rate.shadow and gauge.shadow
            # Far above 2 ops/s, all at once: every acquisition goes ahead.
            assert all(rate.try_acquire() for _ in range(50))
            assert rate.would_refuse >= 45, rate.would_refuse
            permits = [gauge.try_mark() for _ in range(5)]
            assert all(p is not None for p in permits)
            assert gauge.would_refuse == 3
            for p in permits:
                p.release()

            (s.dir / "doorman.toml").write_text(SHADOW_CONFIG.format(shadow="false"))
            wait_until(
                lambda: (not rate.shadow and not gauge.shadow)
                or f"shadow: rate {rate.shadow}, gauge {gauge.shadow}",
                seconds=15,
                what="shadow mode turned off by the push",
            )
            time.sleep(1.0)  # the bucket refills its burst
            taken = sum(rate.try_acquire() for _ in range(50))
            assert taken < 10, taken
            counted = rate.would_refuse
            held = [gauge.try_mark() for _ in range(5)]
            assert sum(p is not None for p in held) == 2
            assert rate.would_refuse == counted
    finally:
        s.stop()
