"""The exceptions of doorman_client, defined here so that they can have
several bases (``DeadlineExceeded`` is also a ``TimeoutError``,
``InvalidArgument`` also a ``ValueError``); the native module raises them.

Must not: import the native module (it imports this one lazily).
"""

__all__ = [
    "DoormanError",
    "DeadlineExceeded",
    "ClientClosed",
    "InvalidArgument",
    "ConfigError",
]


class DoormanError(Exception):
    """Base class of every error raised by doorman_client."""


class DeadlineExceeded(DoormanError, TimeoutError):
    """No capacity within the timeout given to ``wait``, ``mark`` or their
    asyncio variants. Nothing was taken."""


class ClientClosed(DoormanError):
    """The client was closed (``Client.close()`` or the end of its ``with``
    block) before or while the call waited."""


class InvalidArgument(DoormanError, ValueError):
    """An argument was refused: no servers, an empty or too long id, wants
    that are negative or not finite, an id already open as the other kind of
    resource, a bad timeout or permit count, an unknown fallback."""


class ConfigError(DoormanError):
    """A TLS file could not be read or holds no usable certificate or key."""
