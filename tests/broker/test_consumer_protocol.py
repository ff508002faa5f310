"""The consumer group protocol (KIP-848) with confluent-kafka ``group.protocol=consumer``.

Real broker process, real librdkafka consumers: members join and get balanced
assignments, a second member makes the first give partitions up (every record read
exactly once across members), a member that vanishes loses its partitions after the
session timeout, a member leaves cleanly, commits show in ``logtrove lag``, and the group
survives a broker restart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.wire import WireClient

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
        """Read what is there and commit it before the next poll (where revocations
        happen), so a partition's next owner starts after what this member read."""
        messages = [m for m in self.consumer.consume(500, 0.05) if m.error() is None]
        self.read += [int(m.value()) for m in messages]
        if messages:
            self.consumer.commit(asynchronous=False)


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


def describe(bootstrap_port: int, group: str) -> Any:
    with WireClient(bootstrap_port) as wire:
        return wire.request(69, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]


def test_second_member_takes_half_after_the_first_revokes_and_every_record_is_read_once(
    kip848_broker: BrokerProcess,
) -> None:
    boot = kip848_broker.bootstrap
    create_topic(boot, "pair")
    produce(boot, "pair", 300)
    first = Member(boot, "pair-group", "pair")
    second: Member | None = None
    try:
        poll_all([first], lambda: first.owned == set(range(PARTITIONS)) and len(first.read) >= 100)
        second = Member(boot, "pair-group", "pair")
        members = [first, second]
        poll_all(members, lambda: balanced(members))
        produce(boot, "pair", 300, start=300)
        poll_all(members, lambda: len(first.read) + len(second.read) >= 600)
        assert sorted(first.read + second.read) == list(range(600))  # once each: no duplicates
        assert len(first.owned) == len(second.owned) == PARTITIONS // 2
        group = describe(kip848_broker.port, "pair-group")
        assert group.group_state == "Stable"
        assert {m.member_epoch for m in group.members} == {group.assignment_epoch}
    finally:
        first.consumer.close()
        if second is not None:
            second.consumer.close()


def test_clean_leave_gives_the_partitions_to_the_others_at_once(kip848_broker: BrokerProcess) -> None:
    boot = kip848_broker.bootstrap
    create_topic(boot, "leave")
    members = [Member(boot, "leave-group", "leave") for _ in range(3)]
    try:
        poll_all(members, lambda: balanced(members))
        started = time.monotonic()
        members.pop().consumer.close()
        poll_all(members, lambda: balanced(members))
        assert time.monotonic() - started < SESSION_MS / 1000  # not waiting for the session
        assert len(describe(kip848_broker.port, "leave-group").members) == 2
    finally:
        for m in members:
            m.consumer.close()


KILLED_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
"""


def test_killed_member_loses_its_partitions_after_the_session_timeout(kip848_broker: BrokerProcess) -> None:
    boot = kip848_broker.bootstrap
    create_topic(boot, "killed")
    survivor = Member(boot, "killed-group", "killed")
    victim = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, boot, "killed-group", "killed"])
    try:
        poll_all([survivor], lambda: len(survivor.owned) == PARTITIONS // 2)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        killed_at = time.monotonic()
        poll_all([survivor], lambda: survivor.owned == set(range(PARTITIONS)))
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.8
        assert [m.member_id for m in describe(kip848_broker.port, "killed-group").members] == [
            survivor.consumer.memberid()
        ]
    finally:
        if victim.poll() is None:
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(10)
        survivor.consumer.close()
