"""The consumer group protocol (KIP-848) with confluent-kafka ``group.protocol=consumer``.

Real broker process, real librdkafka consumers: members join and get balanced
assignments, a second member makes the first give partitions up (every record read
exactly once across members), a member that vanishes loses its partitions after the
session timeout, a member leaves cleanly, commits show in ``logtrove lag``, and the group
survives a broker restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.testing import BrokerProcess, HttpBrokerProcess, WireClient, free_port, wait_until
from logtrove.wire import ApiKey

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

    def polled_until() -> bool:
        for m in members:
            m.poll()
        return bool(until())

    wait_until(
        polled_until, timeout, interval_s=0, what=lambda: f"owned: {[sorted(m.owned) for m in members]}"
    )


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
        admin = AdminClient({"bootstrap.servers": kip848_broker.bootstrap})
        described = admin.describe_consumer_groups(["solo-group"])["solo-group"].result(10)
        assert (described.type, described.state) == (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)
        (only,) = described.members
        assert {tp.partition for tp in only.assignment.topic_partitions} == set(range(PARTITIONS))
    finally:
        member.consumer.close()


def describe(bootstrap_port: int, group: str) -> Any:
    with WireClient(bootstrap_port) as wire:
        return wire.request(
            ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False}
        ).groups[0]


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


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from logtrove.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_commits_show_in_lag_and_groups_list_tells_the_protocols_apart(kip848_broker: BrokerProcess) -> None:
    boot = kip848_broker.bootstrap
    create_topic(boot, "lagged")
    produce(boot, "lagged", 60)
    member = Member(boot, "new-protocol", "lagged")
    classic = Consumer({"bootstrap.servers": boot, "group.id": "old-protocol", "enable.auto.commit": False})
    try:
        poll_all([member], lambda: len(member.read) == 60)
        produce(boot, "lagged", 12, start=60)  # 2 more on each partition, not read
        classic.commit(offsets=[TopicPartition("lagged", 0, 5)], asynchronous=False)
        for args in (["--bootstrap", boot], ["--data", str(kip848_broker.data)]):
            (group,) = json.loads(cli("lag", "new-protocol", "--json", *args).stdout)
            assert group["lag"] == 12, args
        listed = json.loads(cli("groups", "list", "--json", "--bootstrap", boot).stdout)
        kinds = {row["group"]: (row["type"], row["state"]) for row in listed}
        assert kinds == {"new-protocol": ("consumer", "Stable"), "old-protocol": ("classic", "Empty")}
        offline = json.loads(cli("groups", "list", "--json", "--data", str(kip848_broker.data)).stdout)
        assert {row["group"]: row["type"] for row in offline} == {
            "new-protocol": "consumer",
            "old-protocol": "classic",
        }
    finally:
        member.consumer.close()
        classic.close()


def test_members_carry_on_across_a_broker_restart_without_rereading(kip848_broker: BrokerProcess) -> None:
    boot = kip848_broker.bootstrap
    create_topic(boot, "restart")
    produce(boot, "restart", 60)
    members = [Member(boot, "restart-group", "restart") for _ in range(2)]
    try:
        poll_all(members, lambda: balanced(members) and sum(len(m.read) for m in members) == 60)
        before = {m.consumer.memberid(): m.owned for m in members}
        epoch = describe(kip848_broker.port, "restart-group").group_epoch
        kip848_broker.stop()
        kip848_broker.start()
        produce(boot, "restart", 60, start=60)
        poll_all(members, lambda: sum(len(m.read) for m in members) >= 120)
        assert sorted(r for m in members for r in m.read) == list(range(120))
        assert {m.consumer.memberid(): m.owned for m in members} == before
        assert describe(kip848_broker.port, "restart-group").group_epoch == epoch  # no rebalance
    finally:
        for m in members:
            m.consumer.close()


def test_members_come_and_go_while_records_arrive_and_each_is_read_once(kip848_broker: BrokerProcess) -> None:
    boot = kip848_broker.bootstrap
    create_topic(boot, "churn")
    members: list[Member] = []
    gone: list[Member] = []
    produced = 0

    def total() -> int:
        return sum(len(m.read) for m in members + gone)

    try:
        for step in ("join", "join", "join", "leave", "join", "leave"):
            if step == "join":
                members.append(Member(boot, "churn-group", "churn"))
            else:
                leaving = members.pop(0)
                leaving.consumer.close()
                gone.append(leaving)
            produce(boot, "churn", 60, start=produced)
            produced += 60
            poll_all(members, lambda want=produced: balanced(members) and total() == want)
        read = sorted(r for m in members + gone for r in m.read)
        assert read == list(range(produced))
    finally:
        for m in members:
            m.consumer.close()


def test_the_console_lists_a_consumer_protocol_group_with_its_type(tmp_path: Path) -> None:
    with HttpBrokerProcess(tmp_path / "data", free_port(), free_port(), *BROKER_ARGS) as proc:
        create_topic(proc.bootstrap, "shown")
        produce(proc.bootstrap, "shown", 12)
        member = Member(proc.bootstrap, "shown-group", "shown", **{"client.id": "viewer"})
        try:
            poll_all([member], lambda: len(member.read) == 12)
            with urllib.request.urlopen(f"{proc.http}/api/v1/groups/shown-group", timeout=10) as answer:
                body = json.loads(answer.read())
        finally:
            member.consumer.close()
    assert (body["type"], body["state"], body["members"], body["lag"]) == ("consumer", "Stable", 1, 0)
    assert body["member_list"][0]["client_id"] == "viewer"


def test_a_regex_subscription_is_resolved_by_the_broker_and_follows_new_topics(
    kip848_broker: BrokerProcess,
) -> None:
    boot = kip848_broker.bootstrap
    create_topic(boot, "rx-first", 2)
    create_topic(boot, "other", 2)
    member = Member(boot, "rx-group", "^rx-.*")
    try:
        poll_all(
            [member],
            lambda: (
                {(tp.topic, tp.partition) for tp in member.consumer.assignment()}
                == {("rx-first", 0), ("rx-first", 1)}
            ),
        )
        create_topic(boot, "rx-second", 2)
        wanted = {(t, p) for t in ("rx-first", "rx-second") for p in (0, 1)}
        poll_all(
            [member], lambda: {(tp.topic, tp.partition) for tp in member.consumer.assignment()} == wanted
        )
    finally:
        member.consumer.close()
