"""Produce / consume helpers for the three Python Kafka clients, used by the broker tests.

Each ``produce_*`` sends ``messages`` (key, value, headers) and returns when all are
acknowledged; each ``consume_*`` reads partition 0 of a topic from the beginning until
``count`` records arrived, returning (key, value, headers) tuples, and raises
:class:`TimeoutError` when they do not within ``DEADLINE_S``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from logtrove.testing import consume_until, wait_until

Message = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]

DEADLINE_S = 30


def produce_confluent(bootstrap: str, topic: str, messages: list[Message], **config: Any) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    errors: list[Any] = []
    for key, value, headers in messages:
        producer.produce(
            topic,
            value=value,
            key=key,
            headers=headers,
            partition=0,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors


def consume_confluent(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[Message]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    try:
        got = consume_until(consumer, count, DEADLINE_S, what=f"records of {topic}-{partition}")
    finally:
        consumer.close()
    return [(msg.key(), msg.value(), list(msg.headers() or [])) for msg in got]


def produce_kafka_python(bootstrap: str, topic: str, messages: list[Message], **config: Any) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **config)
    futures = [
        producer.send(topic, value=value, key=key, headers=headers, partition=0)
        for key, value, headers in messages
    ]
    producer.flush(DEADLINE_S)
    for f in futures:
        f.get(DEADLINE_S)
    producer.close(DEADLINE_S)


def consume_kafka_python(bootstrap: str, topic: str, count: int) -> list[Message]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out: list[Message] = []

    def enough() -> bool:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend((r.key, r.value, list(r.headers or [])) for r in records)
        return len(out) >= count

    try:
        wait_until(
            enough, DEADLINE_S, interval_s=0, what=lambda: f"{count} records of {topic} ({len(out)} read)"
        )
    finally:
        consumer.close()
    return out


def produce_aiokafka(bootstrap: str, topic: str, messages: list[Message], **config: Any) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **config)
        await producer.start()
        try:
            futures = [
                await producer.send(topic, value=value, key=key, headers=headers, partition=0)
                for key, value, headers in messages
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


def consume_aiokafka(bootstrap: str, topic: str, count: int) -> list[Message]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Message]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
        )
        await consumer.start()
        out: list[Message] = []
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + DEADLINE_S
            while len(out) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    out.extend((r.key, r.value, list(r.headers or [])) for r in records)
        finally:
            await consumer.stop()
        return out

    return asyncio.run(run())


def poll_until(members: list[Any], done: Any, seconds: float, what: str) -> None:
    """Call ``poll()`` on every member (group-member wrappers of the tests) until
    ``done()`` holds; raise :class:`TimeoutError` naming ``what`` after ``seconds``."""

    def polled_and_done() -> bool:
        for m in members:
            m.poll()
        return bool(done())

    wait_until(polled_and_done, seconds, interval_s=0, what=what)
