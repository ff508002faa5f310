"""The consumer group protocol (KIP-848) with confluent-kafka ``group.protocol=consumer``.

Real broker process, real librdkafka consumers: members join and get balanced
assignments, a second member makes the first give partitions up (every record read
exactly once across members), a member that vanishes loses its partitions after the
session timeout, a member leaves cleanly, commits show in ``logtrove lag``, and the group
survives a broker restart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker.conftest import BrokerProcess, free_port

PARTITIONS = 6
SESSION_MS = 3000
BROKER_ARGS = (
    "--consumer-heartbeat-interval-ms",
    "300",
    "--consumer-session-timeout-ms",
    str(SESSION_MS),
)


@pytest.fixture
def kip848_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "data", free_port(), *BROKER_ARGS) as proc:
        yield proc


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    producer.flush(10)


class Member:
    """A ``group.protocol=consumer`` consumer that records what it reads."""

    def __init__(self, bootstrap: str, group: str, topic: str, **extra: Any) -> None:
        self.read: list[int] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                **extra,
            }
        )
        self.consumer.subscribe([topic])

    @property
    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def poll(self) -> None:
        for message in self.consumer.consume(500, 0.05):
            if message.error() is None:
                self.read.append(int(message.value()))
                self.consumer.commit(message, asynchronous=True)


def poll_all(members: list[Member], until: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if until():
            return
    raise AssertionError(f"timed out; owned: {[sorted(m.owned) for m in members]}")


def balanced(members: list[Member], partitions: int = PARTITIONS) -> bool:
    owned = [m.owned for m in members]
    every = sorted(p for o in owned for p in o) == list(range(partitions))
    sizes = [len(o) for o in owned]
    return every and max(sizes) - min(sizes) <= 1


def test_single_member_gets_every_partition_and_reads_everything(kip848_broker: BrokerProcess) -> None:
    create_topic(kip848_broker.bootstrap, "solo")
    produce(kip848_broker.bootstrap, "solo", 60)
    member = Member(kip848_broker.bootstrap, "solo-group", "solo")
    try:
        poll_all([member], lambda: len(member.read) == 60)
        assert member.owned == set(range(PARTITIONS))
        assert sorted(member.read) == list(range(60))
    finally:
        member.consumer.close()
