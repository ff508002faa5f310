"""A 3-member confluent-kafka group with subscribe(): the partitions are split, offsets are
committed, a leaving member's partitions move to the others, and after a broker restart
the group resumes from its committed offsets."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.testing import BrokerProcess, consume_until, wait_until

TOPIC = "orders"
PARTITIONS = 6
GROUP = "billing"


def _consumer(bootstrap: str, name: str) -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 300,
            "session.timeout.ms": 6000,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )


def _produce(bootstrap: str, start: int, count: int) -> set[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for i in range(start, start + count):
        value = f"order-{i}".encode()
        producer.produce(TOPIC, value=value, key=f"customer-{i % 17}".encode())
        values.add(value)
    assert producer.flush(30) == 0
    return values


def _poll_all(consumers: list[Any], seen: dict[str, set[bytes]]) -> None:
    """Poll every consumer once, committing synchronously what it received."""
    for c in consumers:
        msgs = c.consume(500, 0.05)
        for m in msgs:
            assert m.error() is None, m.error()
            seen.setdefault(c.memberid() or "?", set()).add(m.value())
        if msgs:
            c.commit(asynchronous=False)


def _pump(consumers: list[Any], want: set[bytes], seen: dict[str, set[bytes]], seconds: float) -> None:
    """Poll until ``want`` has been consumed; :class:`TimeoutError` after ``seconds``."""

    def consumed() -> bool:
        if want <= set().union(*seen.values()):
            return True
        _poll_all(consumers, seen)
        return False

    wait_until(
        consumed,
        seconds,
        interval_s=0,
        what=lambda: f"all {len(want)} consumed (missing {len(want - set().union(*seen.values()))})",
    )
    got = set().union(*seen.values())
    assert want <= got, f"missing {len(want - got)} of {len(want)}"


def _assignments(
    consumers: list[Any], seen: dict[str, set[bytes]], seconds: float, total: int
) -> list[set[int]]:

    def split() -> list[set[int]] | None:
        _poll_all(consumers, seen)
        parts = [{tp.partition for tp in c.assignment()} for c in consumers]
        if sum(len(p) for p in parts) == total and set().union(*parts) == set(range(total)):
            return parts
        return None

    return wait_until(
        split,
        seconds,
        interval_s=0,
        what=lambda: f"partitions split (assigned: {[c.assignment() for c in consumers]})",
    )


def test_group_splits_commits_survives_leave_and_restart(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    first = _produce(broker.bootstrap, 0, 600)

    consumers = [_consumer(broker.bootstrap, f"member-{i}") for i in range(3)]
    for c in consumers:
        c.subscribe([TOPIC])
    seen: dict[str, set[bytes]] = {}
    parts = _assignments(consumers, seen, 30, PARTITIONS)
    assert all(len(p) == 2 for p in parts), parts
    _pump(consumers, first, seen, 30)
    assert len(seen) == 3, "every member consumed its share"

    leaving = consumers.pop()
    leaving.close()
    parts = _assignments(consumers, seen, 30, PARTITIONS)
    assert all(len(p) == 3 for p in parts), parts
    second = _produce(broker.bootstrap, 600, 300)
    _pump(consumers, second, seen, 30)

    committed = consumers[0].committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    assert sum(tp.offset for tp in committed) == 900
    for c in consumers:
        c.close()

    broker.stop()
    broker.start()
    third = _produce(broker.bootstrap, 900, 60)
    resumed = _consumer(broker.bootstrap, "member-after-restart")
    resumed.subscribe([TOPIC])
    got = [m.value() for m in consume_until(resumed, 60, 30, poll_s=0.2, skip_errors=True)]
    time.sleep(0.5)
    got += [m.value() for m in resumed.consume(500, 0.5) if m.error() is None]
    resumed.close()
    assert sorted(got) == sorted(third), "resumed from the committed offsets: only the new messages"
