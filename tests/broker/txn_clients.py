"""confluent-kafka helpers for the transaction tests (here, in ``tests/lag`` and the
exactly-once copier's tests): a topic, a transactional producer, and every value a
consumer of one isolation level reads."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def txn_producer(bootstrap: str, tid: str, **config: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **config})
    producer.init_transactions(15)
    return producer


def read_values(
    bootstrap: str, topic: str, isolation: str, *, partitions: int = 1, settle_s: float = 1.5
) -> list[bytes]:
    """Every value a consumer of ``isolation`` reads from the start of ``topic``, reading
    until the end offsets (of that isolation) are reached and ``settle_s`` passes quiet."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    quiet_since = time.monotonic()
    deadline = time.monotonic() + 20
    while time.monotonic() - quiet_since < settle_s and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is None or msg.error():
            continue
        values.append(msg.value())
        quiet_since = time.monotonic()
    consumer.close()
    return values
