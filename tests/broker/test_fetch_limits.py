"""Fetch stays within its budgets: a partition named twice is read once (merged as Kafka
merges it), the response-wide ``max_bytes`` holds except for the first partition's first
batch, and the memory of a reply nobody reads is bounded and freed when its client goes."""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from logtrove.records import NewRecord, build_batch
from logtrove.testing import BrokerProcess, WireClient, free_port, wait_until
from logtrove.wire import ApiKey

BATCH = struct.Struct(">qi")  # base offset, length of the rest


def _create(client: WireClient, topic: str, partitions: int) -> None:
    created = client.request(
        ApiKey.CREATE_TOPICS,
        4,
        {
            "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1}],
            "timeout_ms": 5000,
        },
    )
    assert created.topics[0].error_code == 0


def _produce(client: WireClient, topic: str, partition: int, values: list[bytes]) -> None:
    for value in values:
        batch = bytes(build_batch([NewRecord(value)]))
        answer = client.request(
            ApiKey.PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
            },
        )
        assert answer.responses[0].partition_responses[0].error_code == 0


def _fetch_body(topics: list[dict[str, Any]], max_bytes: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": 10, "min_bytes": 1, "max_bytes": max_bytes, "topics": topics}


def _want(partition: int, offset: int = 0, max_bytes: int = 1 << 20) -> dict[str, int]:
    return {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes}


def _base_offsets(records: bytes) -> list[int]:
    """Base offsets of the batches in a records field."""
    out, pos = [], 0
    while pos < len(records):
        base, rest = BATCH.unpack_from(records, pos)
        out.append(base)
        pos += BATCH.size + rest
    return out


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def quiet_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker without indexer or cleaner: its RSS is the Kafka listener's alone."""
    with BrokerProcess(tmp_path / "data", free_port(), "--no-indexer", "--no-cleaner") as proc:
        yield proc


@pytest.mark.parametrize("version", [11, 16])
def test_duplicate_partitions_are_merged_as_kafka_does(shared_broker: BrokerProcess, version: int) -> None:
    topic = f"dups-{version}"
    with WireClient(shared_broker.port) as client:
        _create(client, topic, 2)
        _produce(client, topic, 0, [b"a", b"b", b"c"])
        _produce(client, topic, 1, [b"x"])
        if version >= 13:
            meta = client.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}]})
            key: dict[str, Any] = {"topic_id": meta.topics[0].topic_id}
        else:
            key = {"topic": topic}
        # partition 0 named four times (the last asks offset 1), partition 1 in between
        topics = [
            {**key, "partitions": [_want(0, 0), _want(0, 2), _want(1, 0)]},
            {**key, "partitions": [_want(0, 1)]},
        ]
        answer = client.request(ApiKey.FETCH, version, _fetch_body(topics, 1 << 20))
    assert len(answer.responses) == 1
    got = answer.responses[0]
    assert got.topic_id == key["topic_id"] if version >= 13 else got.topic == topic
    assert [p.partition_index for p in got.partitions] == [0, 1]  # place of the first mention
    assert _base_offsets(got.partitions[0].records) == [1, 2]  # offset of the last mention
    assert _base_offsets(got.partitions[1].records) == [0]


def test_response_stays_within_max_bytes_but_the_first_batch(shared_broker: BrokerProcess) -> None:
    topic = "wide"
    with WireClient(shared_broker.port) as client:
        _create(client, topic, 4)
        for p in range(4):
            _produce(client, topic, p, [os.urandom(300_000) for _ in range(3)])
        everything = [{"topic": topic, "partitions": [_want(p) for p in range(4)]}]

        def record_bytes(max_bytes: int) -> list[int]:
            answer = client.request(ApiKey.FETCH, 11, _fetch_body(everything, max_bytes))
            return [len(p.records) for p in answer.responses[0].partitions]

        one_batch = record_bytes(1)[0]
        assert 300_000 < one_batch < 301_000
        sizes = record_bytes(500_000)
        assert sizes == [one_batch, 0, 0, 0]  # a second batch of any partition would pass 500 kB
        assert sum(record_bytes(1_000_000)) == 3 * one_batch  # three fit, all that fits
        assert record_bytes(100_000) == [one_batch, 0, 0, 0]  # only the first batch may exceed it
        assert sum(record_bytes(1 << 30)) == 12 * one_batch


def test_consumer_with_small_fetch_max_bytes_reads_every_partition(shared_broker: BrokerProcess) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic = "wide-consumed"
    values = {(p, i): os.urandom(300_000) for p in range(4) for i in range(3)}
    with WireClient(shared_broker.port) as client:
        _create(client, topic, 4)
        for p in range(4):
            _produce(client, topic, p, [values[(p, i)] for i in range(3)])
    consumer = Consumer(
        {
            "bootstrap.servers": shared_broker.bootstrap,
            "group.id": "small-fetches",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "message.max.bytes": 400_000,
            "fetch.max.bytes": 500_000,
            "receive.message.max.bytes": 500_512,  # librdkafka's floor: fetch.max.bytes + 512
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
    got: dict[tuple[int, int], bytes] = {}

    def all_read() -> bool:
        for msg in consumer.consume(100, 0.5):
            assert msg.error() is None, msg.error()
            got[(msg.partition(), msg.offset())] = msg.value()
        return len(got) >= len(values)

    try:
        wait_until(all_read, 30, interval_s=0, what=lambda: f"{len(values)} records ({len(got)} read)")
    finally:
        consumer.close()
    assert got == values


def test_unread_duplicate_partition_fetch_holds_no_memory(quiet_broker: BrokerProcess) -> None:
    """The finding: 20 mentions of a partition, a reply never read, memory kept after the
    client left. Two partitions of 24 MB each, each named ten times."""
    topic = "amplified"
    with WireClient(quiet_broker.port) as client:
        _create(client, topic, 2)
        for p in range(2):
            _produce(client, topic, p, [os.urandom(900_000) for _ in range(27)])
        request = client.encode_request(
            ApiKey.FETCH,
            11,
            _fetch_body(
                [{"topic": topic, "partitions": [_want(p, 0, 100 << 20) for p in (0, 1)] * 10}], 2**31 - 1
            ),
        )
    assert len(request) < 1024
    pid = quiet_broker.proc.pid if quiet_broker.proc else 0
    time.sleep(0.5)
    baseline = _rss_mb(pid)
    with socket.socket() as attacker:
        attacker.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        attacker.connect(("127.0.0.1", quiet_broker.port))
        attacker.sendall(struct.pack(">i", len(request)) + request)
        peak = max(_sample(pid, 2.0))
        assert peak < 300, f"broker RSS {peak:.0f} MB holding an unread Fetch reply (baseline {baseline:.0f})"
    after = _sample(pid, 5.0, until=lambda mb: mb < baseline + 24)
    assert after[-1] < baseline + 24, (
        f"RSS {after[-1]:.0f} MB after the client left (baseline {baseline:.0f})"
    )
    with WireClient(quiet_broker.port) as client:  # and the broker serves on
        assert (
            client.request(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            ).error_code
            == 0
        )


def _sample(pid: int, seconds: float, until: Any = None) -> list[float]:
    """RSS samples every 0.1 s for ``seconds`` (or until ``until(sample)`` holds)."""
    out: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out.append(_rss_mb(pid))
        if until is not None and until(out[-1]):
            break
        time.sleep(0.1)
    return out


def test_unread_replies_of_many_clients_share_one_memory_budget(tmp_path: Path) -> None:
    """Six clients each ask for 48 MB and read nothing: together they hold about
    ``--fetch-memory-mb``, not six replies; meanwhile a reader still gets a batch a Fetch."""
    broker = BrokerProcess(
        tmp_path / "data", free_port(), "--no-indexer", "--no-cleaner", "--fetch-memory-mb", "32"
    )
    broker.start()
    try:
        topic = "shared-budget"
        with WireClient(broker.port) as client:
            _create(client, topic, 2)
            for p in range(2):
                _produce(client, topic, p, [os.urandom(900_000) for _ in range(27)])
            request = client.encode_request(
                ApiKey.FETCH,
                11,
                _fetch_body(
                    [{"topic": topic, "partitions": [_want(0, 0, 100 << 20), _want(1, 0, 100 << 20)]}],
                    2**31 - 1,
                ),
            )
        pid = broker.proc.pid if broker.proc else 0
        time.sleep(0.5)
        baseline = _rss_mb(pid)
        attackers = []
        try:
            for _ in range(6):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(("127.0.0.1", broker.port))
                sock.sendall(struct.pack(">i", len(request)) + request)
                attackers.append(sock)
            peak = max(_sample(pid, 2.0))
            assert peak < baseline + 100, (
                f"broker RSS {peak:.0f} MB for six unread replies (baseline {baseline:.0f})"
            )
            with WireClient(broker.port) as reader:
                answer = reader.request(
                    ApiKey.FETCH,
                    11,
                    _fetch_body([{"topic": topic, "partitions": [_want(0, 0, 50 << 20)]}], 50 << 20),
                )
                assert len(_base_offsets(answer.responses[0].partitions[0].records)) == 1
        finally:
            for sock in attackers:
                sock.close()
        after = _sample(pid, 5.0, until=lambda mb: mb < baseline + 24)
        assert after[-1] < baseline + 24
        with WireClient(broker.port) as reader:  # the budget is back: a whole reply again
            answer = reader.request(
                ApiKey.FETCH,
                11,
                _fetch_body([{"topic": topic, "partitions": [_want(0, 0, 50 << 20)]}], 50 << 20),
            )
            assert len(_base_offsets(answer.responses[0].partitions[0].records)) > 1
    finally:
        broker.stop()
