"""OffsetCommit while the group rebalances (librdkafka test 0113 ``v_commit_during_rebalance``).

A confluent-kafka member that has processed records commits them in its revoke callback
while a second member joins: the group is PreparingRebalance then, and Kafka accepts a
commit from a current member of the current generation there. The partitions that move
to the new member continue exactly after the committed offsets: nothing is read twice.
The raw test pins Kafka's rules state by state (``validateOffsetCommit``).
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from tests.broker.clients import poll_until

from logtrove.testing import BrokerProcess, WireClient, wait_until
from logtrove.wire import ApiKey

TOPIC = "payments"
PARTITIONS = 4
GROUP = "settlement"


def _produce(bootstrap: str, start: int, count: int) -> set[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = {f"payment-{i}".encode() for i in range(start, start + count)}
    for i, value in enumerate(sorted(values)):
        producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return values


class Member:
    """A consumer that records what it read and what its revoke-time commit did."""

    def __init__(self, bootstrap: str, name: str) -> None:
        self.name = name
        self.read: list[bytes] = []
        self.assigned: list[set[int]] = []
        self.revoke_commits: list[str] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "heartbeat.interval.ms": 200,
                "session.timeout.ms": 6000,
                "fetch.wait.max.ms": 100,
            }
        )
        self.consumer.subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        self.assigned.append({tp.partition for tp in partitions})

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        if not partitions or not self.read:
            return
        try:
            consumer.commit(asynchronous=False)
            self.revoke_commits.append("ok")
        except KafkaException as exc:
            self.revoke_commits.append(str(exc.args[0]))

    def poll(self) -> None:
        for m in self.consumer.consume(500, 0.05):
            assert m.error() is None, m.error()
            self.read.append(m.value())


def test_commit_in_revoke_callback_is_accepted_and_new_owner_does_not_reread(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    first = _produce(broker.bootstrap, 0, 200)

    a = Member(broker.bootstrap, "member-a")
    b: Member | None = None
    try:
        poll_until([a], lambda: set(a.read) >= first, 30, "member-a to read every record")
        assert a.assigned == [set(range(PARTITIONS))]

        b = Member(broker.bootstrap, "member-b")  # joins: member-a is revoked and commits
        new = b
        poll_until(
            [a, b],
            lambda: (
                len(a.assigned) == 2
                and new.assigned
                and a.assigned[-1] | new.assigned[-1] == set(range(PARTITIONS))
            ),
            30,
            "the partitions to be split",
        )
        assert a.revoke_commits == ["ok"], f"commit in the revoke callback failed: {a.revoke_commits}"
        assert b.assigned[-1], "member-b took over partitions"

        second = _produce(broker.bootstrap, 200, 40)
        poll_until([a, b], lambda: set(a.read) | set(new.read) >= second, 30, "the new records")
        time.sleep(0.3)
        for m in (a, b):
            m.poll()
        assert set(b.read) <= second, f"member-b re-read {len(set(b.read) - second)} committed records"
        assert sorted(a.read + b.read) == sorted(first | second), "every record read exactly once"
    finally:
        for m in (a, b):
            if m is not None:
                m.consumer.close()


def _join(wire: WireClient, member_id: str, instance: str | None = None) -> Any:
    return wire.request(
        ApiKey.JOIN_GROUP,
        5,
        {
            "group_id": "raw",
            "session_timeout": 10_000,
            "rebalance_timeout": 3_000,
            "member_id": member_id,
            "group_instance_id": instance,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m"}],
        },
    )


def _commit(wire: WireClient, member_id: str, generation: int) -> int:
    resp = wire.request(
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": "raw",
            "generation_id_or_member_epoch": generation,
            "member_id": member_id,
            "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 7}]}],
        },
    )
    return int(resp.topics[0].partitions[0].error_code)


def test_offset_commit_rules_by_group_state(broker: BrokerProcess) -> None:
    """Stable and PreparingRebalance accept the current generation; CompletingRebalance
    answers REBALANCE_IN_PROGRESS; a stale generation or a stranger is refused."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    with WireClient(broker.port) as leader_conn, WireClient(broker.port) as other_conn:
        leader = _join(leader_conn, "").member_id
        joined = _join(leader_conn, leader)
        assert joined.error_code == 0 and joined.generation_id == 1
        assert _commit(leader_conn, leader, 1) == ErrorCode.rebalance_in_progress  # CompletingRebalance
        sync = {"group_id": "raw", "generation_id": 1, "member_id": leader, "group_instance_id": None}
        assignment = [{"member_id": leader, "assignment": b"a"}]
        assert leader_conn.request(ApiKey.SYNC_GROUP, 3, {**sync, "assignments": assignment}).error_code == 0
        assert _commit(leader_conn, leader, 1) == ErrorCode.none  # Stable

        # a second member asks to join: PreparingRebalance, generation 1 still current
        other = _join(other_conn, "").member_id
        other_conn.send_frame(
            other_conn.encode_request(
                ApiKey.JOIN_GROUP,
                5,
                {
                    "group_id": "raw",
                    "session_timeout": 10_000,
                    "rebalance_timeout": 3_000,
                    "member_id": other,
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b"m"}],
                },
            )
        )
        heartbeat = {"group_id": "raw", "generation_id": 1, "member_id": leader, "group_instance_id": None}
        wait_until(
            lambda: (
                leader_conn.request(ApiKey.HEARTBEAT, 3, heartbeat).error_code
                == ErrorCode.rebalance_in_progress
            ),
            10,
            what="the group starting to rebalance",
        )
        assert _commit(leader_conn, leader, 1) == ErrorCode.none  # PreparingRebalance
        assert _commit(leader_conn, leader, 0) == ErrorCode.illegal_generation
        assert _commit(leader_conn, "stranger", 1) == ErrorCode.unknown_member_id
        assert _commit(leader_conn, "", -1) == ErrorCode.unknown_member_id
