"""Static membership (KIP-345) with confluent-kafka ``group.instance.id``.

Two static members split a topic. One is closed (a static member sends no LeaveGroup)
and started again with the same instance ID within its session timeout: it gets its old
partitions back and the other member is not rebalanced (no revoke, no new assignment).
The old process's member ID is fenced (FENCED_INSTANCE_ID). A static member that stays
away is removed when its session times out, and the other member takes its partitions.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from tests.broker.clients import poll_until

from logtrove.testing import BrokerProcess, WireClient, wait_until
from logtrove.wire import ApiKey

TOPIC = "sensors"
PARTITIONS = 4
GROUP = "dashboards"
SESSION_MS = 6000


class StaticMember:
    """A consumer with a ``group.instance.id`` that logs its rebalance callbacks."""

    def __init__(self, bootstrap: str, instance: str) -> None:
        self.events: list[tuple[str, set[int]]] = []
        self.read: list[tuple[int, int]] = []  # (partition, offset)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "group.instance.id": instance,
                "client.id": instance,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "heartbeat.interval.ms": 300,
                "session.timeout.ms": SESSION_MS,
                "fetch.wait.max.ms": 100,
            }
        )
        self.consumer.subscribe([TOPIC], on_assign=self._on("assign"), on_revoke=self._on("revoke"))

    def _on(self, kind: str) -> Any:
        def callback(_consumer: Any, partitions: list[Any]) -> None:
            self.events.append((kind, {tp.partition for tp in partitions}))

        return callback

    @property
    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def poll(self) -> None:
        for m in self.consumer.consume(500, 0.05):
            assert m.error() is None, m.error()
            self.read.append((m.partition(), m.offset()))


def _fatal(error: Any) -> bool:
    return bool(error.fatal() or error.code() == KafkaError._FATAL)


def _produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(TOPIC, value=b"reading-%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def test_restarted_static_member_takes_its_partitions_back_without_a_rebalance(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    _produce(broker.bootstrap, 40)
    a, b = StaticMember(broker.bootstrap, "node-a"), StaticMember(broker.bootstrap, "node-b")
    members = [a, b]
    try:
        poll_until(
            members, lambda: a.owned and b.owned and len(a.owned | b.owned) == PARTITIONS, 30, "a split"
        )
        poll_until(members, lambda: len(a.read) + len(b.read) == 40, 30, "every record")
        a.consumer.commit(asynchronous=False)
        a_partitions, b_events = a.owned, list(b.events)
        old_member_id = a.consumer.memberid()

        a.consumer.close()  # a static member leaves no LeaveGroup behind
        members = [b]
        restarted = StaticMember(broker.bootstrap, "node-a")
        members = [restarted, b]
        poll_until(members, lambda: restarted.owned == a_partitions, 15, "the restarted member's assignment")
        read_by_b = len(b.read)
        _produce(broker.bootstrap, 8)
        poll_until(members, lambda: len(restarted.read) + len(b.read) - read_by_b == 8, 15, "the new records")
        assert restarted.events == [("assign", a_partitions)]
        assert restarted.consumer.memberid() != old_member_id
        assert b.events == b_events, "the other static member was rebalanced"
        assert all(offset >= 10 for _, offset in restarted.read), (
            "the restarted member re-read committed records"
        )

        with WireClient(broker.port) as wire:
            heartbeat = {
                "group_id": GROUP,
                "generation_id": 1,
                "member_id": old_member_id,
                "group_instance_id": "node-a",
            }
            assert wire.request(ApiKey.HEARTBEAT, 3, heartbeat).error_code == ErrorCode.fenced_instance_id

        # node-a goes away for good: after its session timeout node-b gets everything
        restarted.consumer.close()
        members = [b]
        poll_until(
            members, lambda: b.owned == set(range(PARTITIONS)), SESSION_MS / 1000 + 15, "node-a's expiry"
        )
    finally:
        for m in members:
            m.consumer.close()


def test_old_static_process_is_fenced_when_a_new_one_joins(broker: BrokerProcess) -> None:
    """Two live processes with one instance ID: the newer one takes the place, the older
    one's next request is answered FENCED_INSTANCE_ID, which librdkafka makes fatal."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    errors: list[Any] = []
    old = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": GROUP,
            "group.instance.id": "node-x",
            "heartbeat.interval.ms": 200,
            "session.timeout.ms": SESSION_MS,
            "error_cb": errors.append,
        }
    )
    old.subscribe([TOPIC])
    new: StaticMember | None = None
    try:

        def assigned() -> bool:
            if old.assignment():
                return True
            old.poll(0.1)
            return False

        wait_until(assigned, 20, interval_s=0, what="the old process's assignment")
        assert old.assignment() == [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        new = StaticMember(broker.bootstrap, "node-x")

        def fenced() -> bool:
            if any(_fatal(e) for e in errors):
                return True
            event = old.poll(0.1)  # librdkafka hands a consumer's fatal error to poll()
            if event is not None and event.error() is not None:
                errors.append(event.error())
            new.poll()
            return False

        wait_until(fenced, 20, interval_s=0, what=lambda: f"the old process fenced (errors: {errors})")
        fatal = [e for e in errors if _fatal(e)]
        assert fatal, f"the old process was not fenced: {errors}"
        assert "fenced" in fatal[0].str().lower(), fatal[0]
        poll_until([new], lambda: new.owned == set(range(PARTITIONS)), 10, "the new process's assignment")
    finally:
        old.close()
        if new is not None:
            new.consumer.close()
