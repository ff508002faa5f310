"""Standby and failover: a ``serve --follow`` standby of a logtrove leader is promoted
after the leader stops; it takes writes at the next offsets, keeps every record it had
byte for byte, and a consumer group continues from the commits copied from the leader."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.mirror.helpers import DEADLINE_S, offsets, raw_batches

from logtrove.client import KafkaProtocolError
from logtrove.testing import BrokerProcess, cli_in, free_port, wait_until


def _produce(bootstrap: str, values: list[bytes]) -> list[tuple[int, int]]:
    """(partition, offset) of each record, two partitions round robin."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    placed: list[tuple[int, int]] = []
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err:
            errors.append(err)
        else:
            placed.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i, value in enumerate(values):
        producer.produce("pay", value=value, partition=i % 2, on_delivery=report)
    producer.flush(DEADLINE_S)
    assert not errors, errors
    return placed


def _committed(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "svc", "enable.auto.commit": False})
    try:
        return [
            tp.offset for tp in consumer.committed([TopicPartition("pay", p) for p in (0, 1)], timeout=10)
        ]
    finally:
        consumer.close()


def test_a_promoted_standby_takes_writes_keeps_its_records_and_groups_continue(tmp_path: Path) -> None:
    leader = BrokerProcess(tmp_path / "leader", free_port(), "--no-indexer")
    standby = BrokerProcess(tmp_path / "standby", free_port(), "--no-indexer")
    standby.extra = ("--follow", leader.bootstrap, "--follow-topics", "pay")
    leader.start()
    standby.start()
    try:
        admin = AdminClient({"bootstrap.servers": leader.bootstrap})
        admin.create_topics([NewTopic("pay", 2, 1)])["pay"].result(DEADLINE_S)
        _produce(leader.bootstrap, [b"before %d" % i for i in range(100)])
        consumer = Consumer(
            {"bootstrap.servers": leader.bootstrap, "group.id": "svc", "enable.auto.commit": False}
        )
        consumer.commit(
            offsets=[TopicPartition("pay", 0, 30), TopicPartition("pay", 1, 12)], asynchronous=False
        )
        consumer.close()

        def caught_up() -> bool:
            try:
                done = all(offsets(standby.bootstrap, "pay", p) == (0, 50) for p in (0, 1))
            except KafkaProtocolError:  # the topic is not created on the standby yet
                done = False
            return done and _committed(standby.bootstrap) == [30, 12]

        wait_until(caught_up, DEADLINE_S, interval_s=0.2, what="the standby catching up")
        had = [raw_batches(standby.bootstrap, "pay", p) for p in (0, 1)]
        assert had == [raw_batches(leader.bootstrap, "pay", p) for p in (0, 1)]
        assert leader.stop() == 0  # the leader is gone; the standby goes on retrying it
        time.sleep(1)
        assert standby.stop() == 0, standby.log.read_text()
    finally:
        leader.stop()
        standby.stop()
    # failover: the standby is stopped and promoted offline, then serves as the leader
    promoted = cli_in(tmp_path, "promote", "--data", str(standby.data))
    assert promoted.returncode == 0, promoted.stderr
    assert "promoted 1 topic(s): pay" in promoted.stderr
    standby.extra = ()
    with standby:
        placed = _produce(standby.bootstrap, [b"after %d" % i for i in range(20)])
        assert sorted(placed) == [(p, o) for p in (0, 1) for o in range(50, 60)]
        for p in (0, 1):
            now = raw_batches(standby.bootstrap, "pay", p)
            assert now[: len(had[p])] == had[p], "every record the standby had is intact"
        consumer = Consumer(
            {"bootstrap.servers": standby.bootstrap, "group.id": "svc", "enable.auto.commit": False}
        )
        consumer.subscribe(["pay"])
        got: dict[int, list[int]] = {0: [], 1: []}

        def all_read() -> bool:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                got[msg.partition()].append(msg.offset())
            return len(got[0]) + len(got[1]) >= (60 - 30) + (60 - 12)

        try:
            wait_until(all_read, DEADLINE_S, interval_s=0, what=lambda: f"the standby's records ({got})")
        finally:
            consumer.close()
        assert got == {0: list(range(30, 60)), 1: list(range(12, 60))}
