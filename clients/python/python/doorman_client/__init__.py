"""doorman_client: a Python client of Doorman, the distributed client-side
rate limiter.

The protocol, the leases and the limiters are the Rust client library's
(crate doorman-client), called through a native module; this package adds
the exceptions and the type information.

    from doorman_client import Client

    with Client(["127.0.0.1:6000"]) as client:
        db = client.rate_resource("db/users/1", wants=100.0)
        for query in queries:
            db.wait()  # at most the rate granted to this client
            run(query)

Must not: implement any protocol or limiting logic in Python.
"""

from ._errors import (
    ClientClosed,
    ConfigError,
    DeadlineExceeded,
    DoormanError,
    InvalidArgument,
)
from ._native import (
    Client,
    GaugePermit,
    GaugeResource,
    RateResource,
    Refusal,
    __version__,
)

__all__ = [
    "Client",
    "RateResource",
    "GaugeResource",
    "GaugePermit",
    "Refusal",
    "DoormanError",
    "DeadlineExceeded",
    "ClientClosed",
    "InvalidArgument",
    "ConfigError",
    "__version__",
]
