"""DeleteGroups (42) and OffsetDelete (47) (issue 14, finding 6: librdkafka's test
clean-up calls DeleteGroups, which the broker did not serve).

Kafka's rules: only a group without members can be deleted, and its committed offsets go
with it for good (a restart does not bring them back); OffsetDelete refuses the
partitions of topics a live member subscribes to and deletes the other named commits."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from logtrove.testing import BrokerProcess, WireClient, free_port, wait_until
from logtrove.wire import ApiKey


def _wait_joined(consumer: Consumer) -> None:
    """Poll until the group gave ``consumer`` its partitions."""

    def joined() -> bool:
        if consumer.assignment():
            return True
        consumer.poll(0.2)
        return False

    wait_until(joined, 20, interval_s=0, what="the consumer joining its group")


def _topic(admin: AdminClient, name: str, partitions: int = 2) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit as an admin tool does (no membership)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    parts = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, parts)])[group].result(10)


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = [TopicPartition(topic, p) for p in range(partitions)]
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, asked)])[group].result(10)
    return {tp.partition: tp.offset for tp in got.topic_partitions if tp.offset >= 0}


def _offset_delete(
    port: int, group: str, partitions: list[tuple[str, int]]
) -> tuple[int, dict[tuple[str, int], int]]:
    topics: dict[str, list[dict[str, int]]] = {}
    for t, p in partitions:
        topics.setdefault(t, []).append({"partition_index": p})
    with WireClient(port) as client:
        resp = client.request(
            ApiKey.OFFSET_DELETE,
            0,
            {"group_id": group, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
        )
    errors = {(t.name, int(p.partition_index)): int(p.error_code) for t in resp.topics for p in t.partitions}
    return int(resp.error_code), errors


def test_delete_groups_removes_an_empty_group_and_its_offsets_for_good(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", free_port()) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _topic(admin, "dg-orders")
        _commit(broker.bootstrap, "dg-gone", {("dg-orders", 0): 5, ("dg-orders", 1): 7})
        _commit(broker.bootstrap, "dg-kept", {("dg-orders", 0): 3})

        futures = admin.delete_consumer_groups(["dg-gone", "dg-never-was"])
        futures["dg-gone"].result(10)
        error = futures["dg-never-was"].exception(10)
        assert error is not None and error.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
        assert _committed(broker.bootstrap, "dg-gone", "dg-orders", 2) == {}

        broker.stop()
        broker.start()  # the tombstones are in __consumer_offsets: nothing comes back
        assert _committed(broker.bootstrap, "dg-gone", "dg-orders", 2) == {}
        assert _committed(broker.bootstrap, "dg-kept", "dg-orders", 2) == {0: 3}
        listed = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
        assert "dg-gone" not in listed and "dg-kept" in listed


def test_delete_groups_refuses_a_group_with_members(shared_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    _topic(admin, "dg-live", 1)
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "dg-busy"})
    consumer.subscribe(["dg-live"])
    try:
        _wait_joined(consumer)
        assert consumer.assignment(), "the consumer never joined"
        error = admin.delete_consumer_groups(["dg-busy"])["dg-busy"].exception(10)
        assert error is not None and error.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        consumer.close()
    admin.delete_consumer_groups(["dg-busy"])["dg-busy"].result(10)  # once the member left


def test_offset_delete_spares_subscribed_topics_and_deletes_the_rest(shared_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    _topic(admin, "od-read", 1)
    _topic(admin, "od-old", 2)
    group = "od-group"
    _commit(shared_broker.bootstrap, group, {("od-old", 0): 4, ("od-old", 1): 6})
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group})
    consumer.subscribe(["od-read"])
    try:
        _wait_joined(consumer)
        assert consumer.assignment(), "the consumer never joined"
        consumer.commit(offsets=[TopicPartition("od-read", 0, 2)], asynchronous=False)

        code, errors = _offset_delete(
            shared_broker.port, group, [("od-read", 0), ("od-old", 0), ("od-missing", 0)]
        )
        assert code == ErrorCode.none
        assert errors == {
            ("od-read", 0): ErrorCode.group_subscribed_to_topic,
            ("od-old", 0): ErrorCode.none,
            ("od-missing", 0): ErrorCode.unknown_topic_or_partition,
        }
        assert _committed(shared_broker.bootstrap, group, "od-old", 2) == {1: 6}
        assert _committed(shared_broker.bootstrap, group, "od-read", 1) == {0: 2}
    finally:
        consumer.close()
    code, _ = _offset_delete(shared_broker.port, "od-no-such-group", [("od-old", 1)])
    assert code == ErrorCode.group_id_not_found
