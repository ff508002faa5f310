"""Reading records with a Kafka consumer until enough arrived, with a deadline.

Works with any consumer shaped like confluent-kafka's (``consume(num_messages, timeout)``
returning messages with an ``error()``); the client is not imported here, so the helper
costs nothing to tests that do not use it.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from logtrove.testing.wait import wait_until


class _Message(Protocol):
    def error(self) -> Any: ...


M = TypeVar("M", bound=_Message)


class _Consumer(Protocol[M]):
    def consume(self, num_messages: int, timeout: float) -> list[M]: ...


class ConsumerError(Exception):
    """A message the consumer handed back carried an error (and errors were not skipped)."""


def consume_until(
    consumer: _Consumer[M],
    want: int,
    timeout_s: float = 30.0,
    *,
    poll_s: float = 0.5,
    skip_errors: bool = False,
    what: str = "records",
) -> list[M]:
    """Consume until ``want`` messages arrived and return them, in the order consumed;
    never more than ``want``, so a consumer that commits afterwards commits exactly past
    them. Raise :class:`TimeoutError` naming ``what`` and the count reached when
    ``timeout_s`` passes first. A message that carries an error raises
    :class:`ConsumerError`, or is dropped (not counted) when ``skip_errors``."""
    got: list[M] = []

    def enough() -> bool:
        for message in consumer.consume(want - len(got), poll_s):
            if message.error() is None:
                got.append(message)
            elif not skip_errors:
                raise ConsumerError(f"while consuming {what}: {message.error()}")
        return len(got) >= want

    if want > 0:
        wait_until(enough, timeout_s, interval_s=0.0, what=lambda: f"{want} {what} ({len(got)} consumed)")
    return got
