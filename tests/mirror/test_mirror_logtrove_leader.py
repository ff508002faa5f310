"""``logtrove mirror`` following a real logtrove leader (a broker subprocess): the mirror's
batches, offsets and segment bytes are the leader's; compaction gaps, DeleteRecords, a
SIGKILL mid-stream, new partitions and group commits are followed; a query by key on the
mirror answers the leader's offsets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from tests.mirror.helpers import (
    DEADLINE_S,
    log_bytes,
    mirror_once,
    offsets,
    offsets_of,
    raw_batches,
    same_partitions,
    served,
)

from logtrove.testing import SERVE, BrokerProcess, cli_in, wait_until


def _create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(DEADLINE_S)


def _produce(
    bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes | None]], **config: Any
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    errors: list[Any] = []
    for partition, key, value in records:
        producer.produce(
            topic, key=key, value=value, partition=partition, on_delivery=lambda e, _m: e and errors.append(e)
        )
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors


@pytest.fixture(scope="module")
def orders(leader: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topic ``orders`` (3 partitions, lz4 and uncompressed batches, an idempotent producer)
    on the leader, mirrored once into a fresh data directory, which is returned."""
    _create(leader.bootstrap, "orders", 3, {"retention.ms": "604800000"})
    rows = [(i % 3, b"customer-%d" % (i % 40), b"order %d" % i) for i in range(3000)]
    _produce(leader.bootstrap, "orders", rows[:1500], **{"compression.type": "lz4"})
    _produce(leader.bootstrap, "orders", rows[1500:], **{"enable.idempotence": True})
    data = tmp_path_factory.mktemp("orders") / "mirror"
    mirror_once(leader.bootstrap, data, "ord.*")
    return data


def test_every_batch_offset_and_segment_byte_is_the_leaders(leader: BrokerProcess, orders: Path) -> None:
    with served(orders) as mirror:
        batches = same_partitions(leader.bootstrap, mirror.bootstrap, "orders", 3)
    assert sum(len(b) for b in batches) > 3
    for p in range(3):
        assert log_bytes(orders, "orders", p) == log_bytes(leader.data, "orders", p)
    topic_file = json.loads((orders / "topics" / "orders.json").read_text())
    assert topic_file["followed_from"] == leader.bootstrap
    assert topic_file["configs"] == {"retention.ms": "604800000"}


def test_a_query_by_key_on_the_mirror_returns_the_leaders_offsets(
    leader: BrokerProcess, orders: Path
) -> None:
    consumer = Consumer({"bootstrap.servers": leader.bootstrap, "group.id": "q", "enable.auto.commit": False})
    consumer.assign([TopicPartition("orders", p, 0) for p in range(3)])
    expected: set[tuple[int, int]] = set()
    seen = 0

    def all_seen() -> bool:
        nonlocal seen
        for msg in consumer.consume(1000, 0.5):
            seen += 1
            if msg.key() == b"customer-7":
                expected.add((msg.partition(), msg.offset()))
        return seen >= 3000

    try:
        wait_until(all_seen, DEADLINE_S, interval_s=0, what=lambda: f"3000 orders read ({seen} seen)")
    finally:
        consumer.close()
    assert seen == 3000 and expected
    out = cli_in(
        orders.parent,
        "query",
        "orders",
        "--key",
        "customer-7",
        "--limit",
        "1000",
        "--json",
        "--data",
        str(orders),
    )
    assert out.returncode == 0, out.stderr
    hits = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    found = {(h["partition"], h["offset"]) for h in hits}
    assert found == expected


def _settled(bootstrap: str, topic: str) -> list[bytes]:
    """The leader's batches once its cleaner has left gaps and stopped changing them."""
    reads = [raw_batches(bootstrap, topic, 0)]

    def settled() -> list[bytes] | None:
        time.sleep(1)
        before, now = reads[-1], raw_batches(bootstrap, topic, 0)
        reads.append(now)
        gaps = any(c < last - base + 1 for base, last, c in offsets_of(now))
        return now if gaps and now == before else None

    return wait_until(settled, DEADLINE_S, interval_s=0, what=f"the leader's cleaner settled on {topic}")


def test_a_compacted_leader_topic_is_mirrored_with_its_offset_gaps(
    leader: BrokerProcess, tmp_path: Path
) -> None:
    configs = {"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01"}
    _create(leader.bootstrap, "users", 1, configs)
    writes = [(0, b"user-%d" % (i % 30), b"v%d " % i * (1 + i % 7)) for i in range(2500)]
    writes += [(0, b"filler-%d" % i, b"f" * 100) for i in range(200)]
    _produce(leader.bootstrap, "users", writes, **{"batch.size": 2048})
    theirs = _settled(leader.bootstrap, "users")
    data = tmp_path / "mirror"
    mirror_once(leader.bootstrap, data, "users", "--no-compact")  # the copy, not a local clean
    with served(data) as mirror:
        ours = raw_batches(mirror.bootstrap, "users", 0)
        assert offsets(mirror.bootstrap, "users", 0) == offsets(leader.bootstrap, "users", 0)
    assert ours == theirs
    spans = offsets_of(ours)
    assert any(count < last - base + 1 for base, last, count in spans), "the offset gaps are kept"
    assert sum(count for _, _, count in spans) < spans[-1][1] + 1 - spans[0][0]
    assert json.loads((data / "topics" / "users.json").read_text())["configs"]["cleanup.policy"] == "compact"


def _delete_records(bootstrap: str, topic: str, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.delete_records([TopicPartition(topic, 0, offset)])
    assert next(iter(result.values())).result(DEADLINE_S).low_watermark == offset


def test_the_leaders_log_start_is_followed_even_past_the_mirrors_end(
    leader: BrokerProcess, tmp_path: Path
) -> None:
    _create(leader.bootstrap, "trim", 1)
    one_per_batch = {"linger.ms": 0, "batch.num.messages": 1}
    _produce(leader.bootstrap, "trim", [(0, None, b"r%d" % i) for i in range(40)], **one_per_batch)
    data = tmp_path / "mirror"
    mirror_once(leader.bootstrap, data, "trim")
    _delete_records(leader.bootstrap, "trim", 25)
    _produce(leader.bootstrap, "trim", [(0, None, b"r%d" % i) for i in range(40, 50)], **one_per_batch)
    mirror_once(leader.bootstrap, data, "trim")
    with served(data) as mirror:
        assert offsets(mirror.bootstrap, "trim", 0) == (25, 50)
        assert raw_batches(mirror.bootstrap, "trim", 0) == raw_batches(leader.bootstrap, "trim", 0)
    _produce(leader.bootstrap, "trim", [(0, None, b"r%d" % i) for i in range(50, 60)], **one_per_batch)
    _delete_records(leader.bootstrap, "trim", 55)  # past the mirror's end (50)
    mirror_once(leader.bootstrap, data, "trim")
    with served(data) as mirror:
        assert offsets(mirror.bootstrap, "trim", 0) == (55, 60)
        assert raw_batches(mirror.bootstrap, "trim", 0) == raw_batches(leader.bootstrap, "trim", 0)


def test_a_mirror_killed_mid_stream_resumes_with_no_gap_and_no_duplicate(
    leader: BrokerProcess, tmp_path: Path
) -> None:
    _create(leader.bootstrap, "stream", 2)
    rows = [(i % 2, b"k%d" % i, b"x" * 200) for i in range(20_000)]
    _produce(leader.bootstrap, "stream", rows, **{"batch.num.messages": 50})
    data = tmp_path / "mirror"
    args = ["mirror", "--from", leader.bootstrap, "--topics", "stream", "--data", str(data)]
    log = (tmp_path / "mirror.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, *args, "--max-bytes-per-s", "200000"], stdout=log, stderr=log
    )
    try:

        def progressed() -> bool:
            assert proc.poll() is None, (tmp_path / "mirror.log").read_text()
            status = data / "mirror-status.json"
            rows_done = (
                sum(p["end"] for p in json.loads(status.read_text())["partitions"]) if status.exists() else 0
            )
            return bool(rows_done > 1000)

        wait_until(progressed, DEADLINE_S, interval_s=0.1, what="the mirror making progress (1000 rows)")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        log.close()
    ends = [sum(p["end"] for p in json.loads((data / "mirror-status.json").read_text())["partitions"])]
    assert ends[0] < 20_000, "killed mid-stream"
    mirror_once(leader.bootstrap, data, "stream")
    with served(data) as mirror:
        batches = same_partitions(leader.bootstrap, mirror.bootstrap, "stream", 2)
    spans = [offsets_of(b) for b in batches]
    for partition in spans:
        assert [s[0] for s in partition[1:]] == [s[1] + 1 for s in partition[:-1]], "no gap, no duplicate"
    for p in range(2):
        assert log_bytes(data, "stream", p) == log_bytes(leader.data, "stream", p)


def test_a_partition_and_a_topic_added_at_the_leader_are_followed(
    leader: BrokerProcess, tmp_path: Path
) -> None:
    _create(leader.bootstrap, "grow", 1)
    _produce(leader.bootstrap, "grow", [(0, None, b"a%d" % i) for i in range(20)])
    data = tmp_path / "mirror"
    mirror_once(leader.bootstrap, data, "grow.*")
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    admin.create_partitions([NewPartitions("grow", 3)])["grow"].result(DEADLINE_S)
    _create(leader.bootstrap, "grown", 2)
    _produce(leader.bootstrap, "grow", [(i % 3, None, b"b%d" % i) for i in range(30)])
    _produce(leader.bootstrap, "grown", [(i % 2, None, b"c%d" % i) for i in range(30)])
    mirror_once(leader.bootstrap, data, "grow.*")
    assert json.loads((data / "topics" / "grow.json").read_text())["partitions"] == 3
    with served(data) as mirror:
        same_partitions(leader.bootstrap, mirror.bootstrap, "grow", 3)
        same_partitions(leader.bootstrap, mirror.bootstrap, "grown", 2)


def _lag_rows(out: Any) -> dict[tuple[str, int], tuple[int, int]]:
    assert out.returncode == 0, out.stderr
    rows = {}
    for group in json.loads(out.stdout):
        for topic in group["topics"]:
            for p in topic["partitions"]:
                rows[(topic["topic"], p["partition"])] = (p["committed_offset"], p["lag"])
    return rows


def test_group_commits_are_mirrored_and_lag_on_the_mirror_equals_lag_on_the_leader(
    leader: BrokerProcess, tmp_path: Path
) -> None:
    _create(leader.bootstrap, "paid", 2)
    _produce(leader.bootstrap, "paid", [(i % 2, None, b"p%d" % i) for i in range(100)])
    consumer = Consumer(
        {"bootstrap.servers": leader.bootstrap, "group.id": "billing", "enable.auto.commit": False}
    )
    consumer.commit(
        offsets=[TopicPartition("paid", 0, 30), TopicPartition("paid", 1, 12)], asynchronous=False
    )
    consumer.close()
    data = tmp_path / "mirror"
    mirror_once(leader.bootstrap, data, "paid")
    on_leader = _lag_rows(cli_in(tmp_path, "lag", "billing", "--json", "--bootstrap", leader.bootstrap))
    on_mirror = _lag_rows(cli_in(tmp_path, "lag", "billing", "--json", "--data", str(data)))
    assert on_leader == {("paid", 0): (30, 20), ("paid", 1): (12, 38)}
    assert on_mirror == on_leader


def test_a_topic_recreated_at_the_leader_stops_the_mirror_instead_of_mixing_two_logs(
    leader: BrokerProcess, tmp_path: Path
) -> None:
    _create(leader.bootstrap, "reborn", 1)
    _produce(leader.bootstrap, "reborn", [(0, None, b"first %d" % i) for i in range(10)])
    data = tmp_path / "mirror"
    mirror_once(leader.bootstrap, data, "reborn")
    first = log_bytes(data, "reborn", 0)
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    admin.delete_topics(["reborn"])["reborn"].result(DEADLINE_S)
    _create(leader.bootstrap, "reborn", 1)
    # one record per batch: a batch ends exactly at the mirror's end, so nothing overlaps it
    one_per_batch = {"linger.ms": 0, "batch.num.messages": 1}
    _produce(leader.bootstrap, "reborn", [(0, None, b"second %d" % i) for i in range(30)], **one_per_batch)
    out = cli_in(
        tmp_path, "mirror", "--from", leader.bootstrap, "--topics", "reborn", "--data", str(data), "--once"
    )
    assert out.returncode == 1
    assert "reborn-0 not mirrored" in out.stderr and "diverged" in out.stderr
    assert log_bytes(data, "reborn", 0) == first, "nothing of the new log was appended"


def test_a_corrupt_batch_from_the_leader_is_refused_and_the_other_partitions_go_on(
    leader: BrokerProcess, tmp_path: Path
) -> None:
    _create(leader.bootstrap, "evil", 2)
    one_per_batch = {"linger.ms": 0, "batch.num.messages": 1}
    _produce(
        leader.bootstrap, "evil", [(i % 2, b"k%d" % i, b"value %d" % i) for i in range(10)], **one_per_batch
    )
    segment = sorted((leader.data / "evil-0").glob("*.log"))[-1]
    raw = bytearray(segment.read_bytes())
    raw[-3] ^= 0xFF  # inside the last batch's last record: its CRC32C no longer matches
    segment.write_bytes(bytes(raw))  # same size, in place: the leader serves it as it is
    data = tmp_path / "mirror"
    out = cli_in(
        tmp_path, "mirror", "--from", leader.bootstrap, "--topics", "evil", "--data", str(data), "--once"
    )
    assert out.returncode == 1
    assert "evil-0 not mirrored" in out.stderr and "CRC32C mismatch" in out.stderr
    with served(data) as mirror:
        assert raw_batches(mirror.bootstrap, "evil", 1) == raw_batches(leader.bootstrap, "evil", 1)
        assert offsets(mirror.bootstrap, "evil", 1) == (0, 5)
        assert offsets(mirror.bootstrap, "evil", 0) == (0, 0), "nothing of the refused answer was written"


def test_config_changes_at_the_leader_are_followed(leader: BrokerProcess, tmp_path: Path) -> None:
    _create(leader.bootstrap, "tuned", 1, {"retention.ms": "1000000", "max.message.bytes": "2000000"})
    data = tmp_path / "mirror"
    mirror_once(leader.bootstrap, data, "tuned")
    topic_file = data / "topics" / "tuned.json"
    assert json.loads(topic_file.read_text())["configs"] == {
        "retention.ms": "1000000",
        "max.message.bytes": "2000000",
    }
    altered = cli_in(
        tmp_path,
        *("topics", "alter", "tuned", "--bootstrap", leader.bootstrap),
        *("--config", "retention.ms=2000000", "--config", "cleanup.policy=compact,delete"),
        *("--delete-config", "max.message.bytes"),
    )
    assert altered.returncode == 0, altered.stderr
    mirror_once(leader.bootstrap, data, "tuned")
    assert json.loads(topic_file.read_text())["configs"] == {
        "retention.ms": "2000000",
        "cleanup.policy": "compact,delete",
    }
