"""Type information of the native module doorman_client._native (written in
Rust on top of the doorman-client crate). Keep in step with src/*.rs.
"""

import os
from types import TracebackType
from typing import Awaitable, Literal, Optional, Tuple, Type, Union, final

__all__ = ["Client", "RateResource", "GaugeResource", "GaugePermit", "Refusal", "__version__"]
__version__: str

_Fallback = Union[Literal["pessimistic", "optimistic"], Tuple[Literal["safe"], float]]
_Mode = Literal["lease", "pessimistic", "optimistic", "safe", "refused"]
_Reason = Literal["denied", "invalid", "over_limit"]
_StrPath = Union[str, "os.PathLike[str]"]

@final
class Client:
    """A Doorman client: the connection to the servers of one node, sharing
    capacity for the resources it opens. Runs on a tokio runtime of its own
    (two threads); connecting is lazy, so it starts before its servers.

    Use it as a context manager (sync or async), or call close(), to release
    the capacity held on the servers at once rather than when the leases
    expire.
    """

    def __new__(
        cls,
        servers: list[str],
        client_id: Optional[str] = None,
        fallback: Optional[_Fallback] = "pessimistic",
        rpc_timeout: float = 5.0,
        tls_ca: Optional[_StrPath] = None,
        tls_cert: Optional[_StrPath] = None,
        tls_key: Optional[_StrPath] = None,
        token: Optional[str] = None,
        lease_stream: bool = True,
    ) -> "Client":
        """servers: "host:port" of the node's servers (the master is found
        among them). client_id: default "<hostname>:<pid>:<n>". fallback:
        the capacity without a lease: "pessimistic" (0), "optimistic" (what
        is wanted) or ("safe", default) (the server's safe capacity, else
        default). rpc_timeout: seconds. tls_ca: PEM CA, turns TLS on;
        tls_cert/tls_key: client certificate for mutual TLS. token: bearer
        token sent with every RPC. lease_stream: hold leases on the
        server's lease stream, where grants are pushed (False: poll with
        GetCapacity; a server without one is polled either way).

        Raises InvalidArgument (no servers, bad id, bad fallback or token)
        or ConfigError (an unusable TLS file)."""
    @property
    def client_id(self) -> str:
        """The client id sent to the servers."""
    @property
    def closed(self) -> bool:
        """True once close() was called."""
    def rate_resource(
        self, id: str, wants: Optional[float] = None, priority: int = 0
    ) -> RateResource:
        """Opens (or shares) a rate resource: capacity in operations per
        second. wants=None estimates the rate wanted from use."""
    def gauge_resource(
        self, id: str, wants: Optional[float] = None, priority: int = 0
    ) -> GaugeResource:
        """Opens (or shares) a gauge resource: capacity in operations in
        flight. wants=None estimates it from use."""
    def close(self) -> None:
        """Wakes every wait with ClientClosed and releases the capacity held
        on the servers, within rpc_timeout plus a second. Idempotent."""
    def close_async(self) -> Awaitable[None]:
        """close() as an awaitable."""
    def __enter__(self) -> "Client": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
    def __aenter__(self) -> Awaitable["Client"]: ...
    def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> Awaitable[bool]: ...

@final
class RateResource:
    """A rate-limited resource (operations per second). Handles on the same
    id in one client share one token bucket."""

    @property
    def id(self) -> str: ...
    @property
    def capacity(self) -> float:
        """The rate applied now (ops/s)."""
    @property
    def mode(self) -> _Mode:
        """"lease", or the fallback applied without one."""
    @property
    def note(self) -> Optional[str]:
        """What the server said about its last grant (e.g. "learning mode,
        42 s left"), if anything."""
    @property
    def shadow(self) -> bool:
        """True while the server serves the resource in shadow mode: nothing
        waits or is refused for capacity."""
    @property
    def would_refuse(self) -> int:
        """Acquisitions shadow mode let through that would have waited or
        been refused."""
    @property
    def refusal(self) -> Optional[Refusal]:
        """Why the server refuses the resource while mode is "refused",
        else None."""
    @property
    def wants(self) -> float:
        """The rate asked for now."""
    def wait(self, n: int = 1, timeout: Optional[float] = None) -> None:
        """Waits for n permits and takes them, with the GIL released. Raises
        DeadlineExceeded after timeout seconds (taking nothing) and
        ClientClosed if the client is or gets closed."""
    def wait_async(self, n: int = 1, timeout: Optional[float] = None) -> Awaitable[None]:
        """wait() for asyncio. Cancelling it takes nothing."""
    def try_acquire(self, n: int = 1) -> bool:
        """Takes n permits if available now; never blocks."""
    def set_wants(self, wants: Optional[float]) -> None:
        """Changes the rate asked for (None: estimate from use)."""

@final
class GaugeResource:
    """A gauge resource (operations in flight). Handles on the same id in one
    client share one count."""

    @property
    def id(self) -> str: ...
    @property
    def capacity(self) -> float:
        """Permits in flight allowed now (whole permits count)."""
    @property
    def in_flight(self) -> int:
        """Permits taken and not yet released."""
    @property
    def mode(self) -> _Mode: ...
    @property
    def note(self) -> Optional[str]: ...
    @property
    def shadow(self) -> bool: ...
    @property
    def would_refuse(self) -> int: ...
    @property
    def refusal(self) -> Optional[Refusal]: ...
    @property
    def wants(self) -> float: ...
    def mark(self, timeout: Optional[float] = None) -> GaugePermit:
        """Waits for a free permit and takes it, with the GIL released.
        Raises DeadlineExceeded after timeout seconds and ClientClosed if
        the client is or gets closed. `with gauge.mark(timeout=1.0): ...`"""
    def mark_async(self, timeout: Optional[float] = None) -> Awaitable[GaugePermit]:
        """mark() for asyncio. Cancelling it takes nothing."""
    def try_mark(self) -> Optional[GaugePermit]:
        """A permit if one is free now, else None; never blocks."""
    def set_wants(self, wants: Optional[float]) -> None: ...

@final
class GaugePermit:
    """One operation in flight; released by release(), at the end of a
    `with` block, or when garbage collected."""

    @property
    def released(self) -> bool: ...
    def release(self) -> None:
        """Releases the permit; again does nothing."""
    def __enter__(self) -> "GaugePermit": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

@final
class Refusal:
    """Why the server refuses a resource, as it said for this resource in
    the refusal's details (never parsed from a message)."""

    @property
    def reason(self) -> _Reason:
        """"denied" (the access rules), "invalid" (a field) or
        "over_limit" (a field over one of the protocol's limits)."""
    @property
    def field(self) -> Optional[str]:
        """The field refused ("wants", "client_id"); None for a denial."""
    @property
    def identity(self) -> Optional[str]:
        """For a denial: the identity the server saw (None: none)."""
    @property
    def action(self) -> Optional[str]:
        """For a denial: what was denied ("acquire")."""
    @property
    def message(self) -> str:
        """Why, for people."""
    def __eq__(self, other: object, /) -> bool: ...
