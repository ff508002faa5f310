"""The errors of the clients.

::

    KafkaProtocolError     the broker answered with a Kafka error code, or unreadably
    HttpApiError           the broker's HTTP API is unreachable, refused, or another broker's
    ClientConfigError      (a ValueError) a client properties file that cannot be used
"""

from __future__ import annotations

from typing import Any


class KafkaProtocolError(Exception):
    """The broker answered with a Kafka error code (or an unreadable response)."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code


class HttpApiError(Exception):
    """The broker's HTTP API could not be reached, answered with a problem, or belongs to
    another broker."""


class ClientConfigError(ValueError):
    """A client properties file that cannot be used; the message says why."""


def check(code: Any, message: str | None, what: str) -> None:
    """Raise :class:`KafkaProtocolError` for a non-zero error code."""
    value = int(code)
    if value:
        name = getattr(code, "name", str(value)).upper()
        raise KafkaProtocolError(f"{what}: {name}" + (f" ({message})" if message else ""), value)
