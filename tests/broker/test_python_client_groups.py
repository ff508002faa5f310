"""kafka-python and aiokafka as group members (their own JoinGroup / SyncGroup /
OffsetCommit / OffsetFetch versions): subscribe, consume, commit, and a second consumer
of the group resumes after the committed offsets."""

from __future__ import annotations

import asyncio
import time

from kafka import KafkaConsumer
from tests.broker import clients

from logtrove.testing import BrokerProcess, wait_until


def _kafka_python_read(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    got: list[bytes] = []

    def enough() -> bool:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(r.value for r in records)
        return len(got) >= count

    try:
        wait_until(enough, 30, interval_s=0, what=lambda: f"{count} records of {topic} ({len(got)} read)")
        consumer.commit()
    finally:
        consumer.close()
    return got


def _aiokafka_read(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < count and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got += [r.value for r in records]
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def test_python_clients_consume_in_groups_and_resume(shared_broker: BrokerProcess) -> None:
    for name, read in (("kafka-python", _kafka_python_read), ("aiokafka", _aiokafka_read)):
        topic = f"grp-{name}"
        first = [(None, f"{name}-{i}".encode(), []) for i in range(50)]
        clients.produce_confluent(shared_broker.bootstrap, topic, first)  # type: ignore[arg-type]
        assert read(shared_broker.bootstrap, topic, name, 50) == [v for _, v, _ in first]
        second = [(None, f"{name}-{i}".encode(), []) for i in range(50, 60)]
        clients.produce_confluent(shared_broker.bootstrap, topic, second)  # type: ignore[arg-type]
        assert read(shared_broker.bootstrap, topic, name, 10) == [v for _, v, _ in second]
