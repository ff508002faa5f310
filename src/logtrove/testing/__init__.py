"""Test helpers shipped with the package, reused by every subpackage's tests (as trio
ships ``trio.testing``): a clock that moves only when told, the broker subprocess
harness, a raw Kafka wire client, :func:`wait_until` and :func:`consume_until`.

* :mod:`.clock`: :class:`FakeClock`
* :mod:`.broker`: :class:`BrokerProcess` / :class:`HttpBrokerProcess`, :func:`free_port`,
  :func:`cli_in`
* :mod:`.wire`: :class:`WireClient`, requests with exact control over versions and bytes
* :mod:`.wait`: :func:`wait_until`
* :mod:`.consume`: :func:`consume_until`, a Kafka consumer read until enough records came
* :mod:`.old_formats`: derived files as earlier versions wrote them (imported by name)
* :mod:`.kafka`: Apache Kafka's JVM programs and a KRaft broker or cluster of them
  (imported by name)
"""

from logtrove.testing.broker import SERVE, BrokerProcess, HttpBrokerProcess, cli_in, free_port
from logtrove.testing.clock import FakeClock
from logtrove.testing.consume import ConsumerError, consume_until
from logtrove.testing.wait import wait_until
from logtrove.testing.wire import WireClient

__all__ = [
    "SERVE",
    "BrokerProcess",
    "ConsumerError",
    "FakeClock",
    "HttpBrokerProcess",
    "WireClient",
    "cli_in",
    "consume_until",
    "free_port",
    "wait_until",
]
