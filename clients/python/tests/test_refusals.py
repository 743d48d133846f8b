"""Refusals per resource: when the access rules deny 50 resources that a
client asks for in one request, each of them is told why (a typed
Refusal, read from the status details, never from the message), and the
allowed one is served."""

import re
import urllib.request

from conftest import Server, wait_for_lease, wait_until

from doorman_client import Client, Refusal

CONFIG = """\
[[resources]]
identifier_glob = "*"
capacity = 100.0
[resources.algorithm]
kind = "STATIC"
lease_length = 60
refresh_interval = 5
learning_mode_duration = 0

[[access]]
identities = ["web"]
resources = ["web/*"]
actions = ["acquire"]
"""

TOKEN = "web-0123456789abcdef"
TOKENS = f'[[token]]\nidentity = "web"\ntoken = "{TOKEN}"\n'


def denied_requests(server):
    """How many requests the server's access rules refused."""
    with urllib.request.urlopen(f"http://{server.http}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r'^doorman_server_access_denied_total\{action="acquire"\} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


def test_fifty_resources_denied_in_one_request_are_fifty_typed_refusals(tmp_path, dead_addr):
    # The client opens every resource before the server is up, so that its
    # first answered request carries all of them.
    with Client([dead_addr], token=TOKEN, rpc_timeout=1.0) as client:
        denied = [client.rate_resource(f"deny/r{i:02}", wants=1.0) for i in range(25)]
        denied += [client.gauge_resource(f"deny/g{i:02}", wants=1.0) for i in range(25)]
        allowed = client.rate_resource("web/ok", wants=1.0)
        assert all(r.refusal is None for r in denied)
        server = Server(tmp_path, "acl", CONFIG, files={"tokens.toml": TOKENS},
                        args=["--auth-tokens", "tokens.toml"], addr=dead_addr)
        try:
            wait_until(lambda: all(r.mode == "refused" for r in denied), 15,
                       "every denied resource refused")
            assert denied_requests(server) == 1, "one request refused them all"
            for r in denied:
                why = r.refusal
                assert isinstance(why, Refusal)
                assert (why.reason, why.identity, why.action, why.field) == (
                    "denied", "web", "acquire", None)
                assert why.message == (
                    f'identity "web" may not acquire resource "{r.id}": '
                    "no access rule allows it"
                )
                assert r.capacity == 0.0
            assert len({r.refusal.message for r in denied}) == 50
            wait_for_lease(allowed)
            assert allowed.refusal is None
        finally:
            server.stop()
