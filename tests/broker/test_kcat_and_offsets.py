"""kcat (-L, -P, -C -o beginning, -C -o s@<ms>) and ListOffsets by time against a live
broker; by-time answers must agree with the storage's own lookup."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from logtrove.storage import Storage
from logtrove.testing import BrokerProcess, WireClient

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")


def _kcat(broker: BrokerProcess, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(
        ["kcat", "-b", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout


def test_kcat_lists_produces_and_consumes(broker: BrokerProcess) -> None:
    lines = [f"k{i}:value {i}" for i in range(50)]
    _kcat(broker, "-P", "-t", "kc", "-K:", stdin="\n".join(lines) + "\n")
    listing = _kcat(broker, "-L")
    assert 'topic "kc" with 1 partitions' in listing
    assert "broker 0 at 127.0.0.1" in listing
    out = _kcat(broker, "-C", "-t", "kc", "-o", "beginning", "-e", "-f", "%k:%s\n")
    assert out.splitlines() == lines


def _produce_timed(bootstrap: str, topic: str, stamps: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, ts in enumerate(stamps):
        producer.produce(topic, value=f"v{i}".encode(), timestamp=ts, partition=0)
        if i % 10 == 9:
            producer.flush(10)
    assert producer.flush(10) == 0


def test_kcat_and_clients_find_offsets_by_time_like_storage(broker: BrokerProcess) -> None:
    base = 1_700_000_000_000
    # not monotonic on purpose: the answer is the first record with timestamp >= T
    stamps = [base + 1000 * i + (5000 if i % 10 == 3 else 0) for i in range(100)]
    _produce_timed(broker.bootstrap, "timed", stamps)
    queries = [
        base - 1,
        base,
        base + 1,
        base + 4_000,
        base + 33_500,
        base + 98_999,
        base + 99_000,
        base + 200_000,
    ]

    # kcat -o s@T starts at the first record with timestamp >= T
    out = _kcat(broker, "-C", "-t", "timed", "-o", f"s@{base + 33_500}", "-e", "-f", "%o\n")
    first_kcat = int(out.split()[0])

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    confluent = [
        consumer.offsets_for_times([TopicPartition("timed", 0, q)], timeout=10)[0].offset for q in queries
    ]
    consumer.close()
    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = KTopicPartition("timed", 0)
    kafka_python = []
    for q in queries:
        answer = kp.offsets_for_times({tp: q})[tp]
        kafka_python.append(answer.offset if answer is not None else -1)
    kp.close()

    broker.stop()
    with Storage.open(broker.data, read_only=True) as storage:
        log = storage.log("timed", 0)
        expected = []
        for q in queries:
            hit = log.offset_for_timestamp(q)
            expected.append(hit.offset if hit is not None else -1)
    broker.start()
    assert confluent == expected
    assert kafka_python == expected
    assert first_kcat == expected[queries.index(base + 33_500)]


def test_list_offsets_earliest_latest_and_max_timestamp(broker: BrokerProcess) -> None:
    stamps = [2_000_000_000_000 + i for i in range(20)]
    stamps[7] = 2_100_000_000_000
    _produce_timed(broker.bootstrap, "edges", stamps)
    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = KTopicPartition("edges", 0)
    assert kp.beginning_offsets([tp])[tp] == 0
    assert kp.end_offsets([tp])[tp] == 20
    kp.close()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "edges"})
    low, high = consumer.get_watermark_offsets(TopicPartition("edges", 0), timeout=10)
    consumer.close()
    assert (low, high) == (0, 20)
    with WireClient(broker.port) as wire:
        answer = wire.list_offsets("edges", 0, -3)
    assert (answer.offset, answer.timestamp) == (7, 2_100_000_000_000)
