"""Compaction end to end with a real client: confluent-kafka writes a compacted topic
through the broker (overwrites and tombstones), ``logtrove compact`` cleans it, and a
fresh consumer reading from the beginning gets exactly one record per live key, at the
offset it was written at. The same again with the broker's own background cleaner."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from logtrove.testing import SERVE, BrokerProcess, free_port, wait_until

DEADLINE_S = 60
KEYS = 40


def _admin_create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=configs)])
    futures[topic].result(DEADLINE_S)


def _produce(bootstrap: str, topic: str, writes: list[tuple[bytes, bytes | None]]) -> list[int]:
    """Produce in order; the offset each write landed at (from the delivery reports)."""
    from confluent_kafka import Producer

    # small batches: a segment holds whole batches, and the active one is never cleaned
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 2048, "enable.idempotence": True}
    )
    offsets: dict[int, int] = {}
    errors: list[Any] = []

    def report(i: int) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            if err:
                errors.append(err)
            else:
                offsets[i] = msg.offset()

        return on_delivery

    for i, (key, value) in enumerate(writes):
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=report(i))
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors
    return [offsets[i] for i in range(len(writes))]


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """A fresh consumer from the beginning up to the high watermark: (offset, key, value)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fresh-{time.monotonic_ns()}",
            "enable.auto.commit": False,
        }
    )
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes, bytes | None]] = []

        def at_end() -> bool:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                out.append((msg.offset(), msg.key(), msg.value()))
            return bool(out) and out[-1][0] >= high - 1

        wait_until(
            at_end,
            DEADLINE_S,
            interval_s=0,
            what=lambda: f"{topic} read to offset {high - 1} ({len(out)} read)",
        )
        return out
    finally:
        consumer.close()


def _workload(seed: int) -> list[tuple[bytes, bytes | None]]:
    """Random overwrites and tombstones over KEYS keys, then unique filler keys that push
    all of it out of the active segment (which is never cleaned)."""
    rng = random.Random(seed)
    writes: list[tuple[bytes, bytes | None]] = []
    for i in range(3000):
        key = f"user-{rng.randrange(KEYS)}".encode()
        value = None if rng.random() < 0.1 else f"v{i} ".encode() * rng.randint(1, 20)
        writes.append((key, value))
    writes += [(f"filler-{i}".encode(), b"f" * 100) for i in range(200)]
    return writes


def _expected(writes: list[tuple[bytes, bytes | None]], offsets: list[int]) -> dict[bytes, tuple[int, bytes]]:
    """Each live key's latest (offset, value)."""
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for (key, value), offset in zip(writes, offsets, strict=True):
        latest[key] = (offset, value)
    return {k: (o, v) for k, (o, v) in latest.items() if v is not None}


def _check_one_record_per_live_key(
    got: list[tuple[int, bytes, bytes | None]], expected: dict[bytes, tuple[int, bytes]]
) -> None:
    assert [o for o, _, _ in got] == sorted({o for o, _, _ in got}), "offsets strictly increase"
    live = [(o, k, v) for o, k, v in got if v is not None]
    assert {k: (o, v) for o, k, v in live} == expected
    assert len(live) == len(expected), "exactly one record per live key"
    tombstones = [k for _, k, v in got if v is None]
    assert len(tombstones) == len(set(tombstones)), "at most one tombstone per deleted key"
    assert not set(tombstones) & set(expected)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``logtrove ARGS…`` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-c", SERVE, *args], capture_output=True, check=False, text=True, timeout=120
    )


CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01"}


def test_logtrove_compact_then_a_fresh_confluent_consumer_reads_one_record_per_live_key(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(tmp_path / "data", free_port(), "--no-cleaner")
    broker.start()
    try:
        _admin_create(broker.bootstrap, "users", CONFIGS)
        writes = _workload(1)
        offsets = _produce(broker.bootstrap, "users", writes)
        assert offsets == list(range(len(writes)))
        before = _read_all(broker.bootstrap, "users")
        assert len(before) == len(writes), "nothing is compacted before the compact command"
        busy = _cli("compact", "users", "--data", str(broker.data))
        assert busy.returncode == 1
        assert "logtrove serve" in busy.stderr and "stop the broker" in busy.stderr
    finally:
        assert broker.stop() == 0
    done = _cli("compact", "users", "--data", str(broker.data))
    assert done.returncode == 0, done.stderr
    assert "removed" in done.stdout
    broker.start()
    try:
        got = _read_all(broker.bootstrap, "users")
        _check_one_record_per_live_key(got, _expected(writes, offsets))
        assert len(got) < len(writes) // 5
    finally:
        broker.stop()


def test_the_brokers_background_cleaner_compacts_while_it_serves(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", free_port(), "--cleaner-interval-s", "0.2")
    broker.start()
    try:
        _admin_create(broker.bootstrap, "users", CONFIGS)
        writes = _workload(2)
        offsets = _produce(broker.bootstrap, "users", writes)
        expected = _expected(writes, offsets)

        def compacted() -> list[tuple[int, bytes, bytes | None]] | None:
            got = _read_all(broker.bootstrap, "users")
            return got if len([v for _, _, v in got if v is not None]) == len(expected) else None

        got = wait_until(
            compacted, DEADLINE_S, interval_s=0.5, what=f"one record for each of {len(expected)} live keys"
        )
        _check_one_record_per_live_key(got, expected)
        status = _cli("topics", "describe", "users", "--data", str(broker.data), "--json")
        assert status.returncode == 0, status.stderr
        assert '"last_clean' in status.stdout
    finally:
        broker.stop()
