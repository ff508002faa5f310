"""acks after fsync (``flush.messages=1`` or ``serve --durable-acks``) by group commit, on a
real broker subprocess: the acknowledgement comes after the fsync (the recovery point,
which only a flush advances, already covers the acknowledged offset), many producers
share few fsyncs, and other connections are served while the disk works."""

from __future__ import annotations

import re
import statistics
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.storage import Storage
from logtrove.testing import HttpBrokerProcess, WireClient, free_port, wait_until
from logtrove.wire import ApiKey


def metric(broker: HttpBrokerProcess, name: str, topic: str, partition: int = 0) -> int:
    """One partition's sample of a ``/metrics`` family."""
    with urllib.request.urlopen(f"{broker.http}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    pattern = rf'^{name}{{topic="{re.escape(topic)}",partition="{partition}"}} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    assert found is not None, f"{name} for {topic}-{partition} not in /metrics"
    return int(float(found.group(1)))


def create_topic(broker: HttpBrokerProcess, topic: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)


@pytest.fixture
def durable_broker(tmp_path: Path) -> Iterator[HttpBrokerProcess]:
    """A broker whose acks=1/all wait for the fsync on every topic."""
    with HttpBrokerProcess(
        tmp_path / "data", free_port(), free_port(), "--durable-acks", "--no-indexer"
    ) as proc:
        yield proc


@pytest.fixture
def http_broker(tmp_path: Path) -> Iterator[HttpBrokerProcess]:
    with HttpBrokerProcess(tmp_path / "data", free_port(), free_port(), "--no-indexer") as proc:
        yield proc


def produce_one_by_one(
    broker: HttpBrokerProcess, topic: str, acks: str, count: int, prefix: bytes = b"r"
) -> Iterator[int]:
    """Produce ``count`` records one at a time (each its own batch and request); yield each
    one's offset once acknowledged."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 0})
    delivered: list[Message] = []
    for i in range(count):
        delivered.clear()
        producer.produce(
            topic, value=prefix + b"%d" % i, partition=0, on_delivery=lambda e, m: delivered.append(m)
        )
        producer.flush(10)
        assert len(delivered) == 1 and delivered[0].error() is None
        offset = delivered[0].offset()
        assert offset is not None
        yield offset


@pytest.mark.parametrize("acks", ["all", "1"])
def test_durable_acks_answer_after_the_fsync_on_a_topic_without_flush_config(
    durable_broker: HttpBrokerProcess, acks: str
) -> None:
    """With the default flush.ms=1000 the ack went out up to a second before the fsync;
    with --durable-acks the recovery point covers the record when its ack arrives."""
    create_topic(durable_broker, "plain")
    for offset in produce_one_by_one(durable_broker, "plain", acks, 20):
        assert metric(durable_broker, "logtrove_log_recovery_point", "plain") >= offset + 1


def test_flush_messages_1_answers_after_the_fsync(http_broker: HttpBrokerProcess) -> None:
    create_topic(http_broker, "synced", **{"flush.messages": "1"})
    create_topic(http_broker, "lazy")
    for offset in produce_one_by_one(http_broker, "synced", "all", 20):
        assert metric(http_broker, "logtrove_log_recovery_point", "synced") >= offset + 1
    list(produce_one_by_one(http_broker, "lazy", "all", 3))  # the default: fsync within flush.ms
    assert metric(http_broker, "logtrove_log_flushes_total", "lazy") <= 1


def test_acks_0_on_a_flush_messages_1_topic_is_fsynced_without_an_answer(
    http_broker: HttpBrokerProcess,
) -> None:
    create_topic(http_broker, "fire", **{"flush.messages": "1", "flush.ms": "3600000"})
    producer = Producer({"bootstrap.servers": http_broker.bootstrap, "acks": "0", "linger.ms": 0})
    for i in range(5):
        producer.produce("fire", value=b"f%d" % i, partition=0)
        producer.flush(10)
    wait_until(  # flush.ms is an hour: only the group commit flushes
        lambda: metric(http_broker, "logtrove_log_recovery_point", "fire") >= 5,
        10,
        what="the recovery point of fire reaching 5",
    )
    assert metric(http_broker, "logtrove_log_recovery_point", "fire") == 5


class ApiVersionsProbe(threading.Thread):
    """Times an ApiVersions round trip on its own connection every 20 ms until stopped."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.latencies: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        with WireClient(self.port, timeout=30) as client:
            while not self.done.is_set():
                start = time.monotonic()
                client.request(
                    ApiKey.API_VERSIONS, 3, {"client_software_name": "probe", "client_software_version": "1"}
                )
                self.latencies.append(time.monotonic() - start)
                time.sleep(0.02)


def test_group_commit_shares_fsyncs_between_producers_and_keeps_serving(
    http_broker: HttpBrokerProcess,
) -> None:
    """Eight acks=all producers, each waiting for every record's ack before the next (one
    batch per request), on a flush.messages=1 topic: every batch is acknowledged after
    its fsync, yet one fsync round covers the batches of several producers (the old broker
    fsynced once per batch, on the event loop), and ApiVersions on another connection
    keeps answering while the rounds run."""
    create_topic(http_broker, "gc", **{"flush.messages": "1"})
    per_producer, producers = 150, 8
    acked: list[int] = []

    def produce(n: int) -> None:
        for offset in produce_one_by_one(http_broker, "gc", "all", per_producer, prefix=b"p%d-" % n):
            acked.append(offset)

    probe = ApiVersionsProbe(http_broker.port)
    probe.start()
    threads = [threading.Thread(target=produce, args=(n,)) for n in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    probe.done.set()
    probe.join(30)

    assert sorted(acked) == list(range(producers * per_producer))
    assert metric(http_broker, "logtrove_log_recovery_point", "gc") == producers * per_producer
    flushes = metric(http_broker, "logtrove_log_flushes_total", "gc")
    with Storage.open(http_broker.data, read_only=True) as storage:
        batches = sum(1 for _ in storage.log("gc", 0).batches())
    assert batches == producers * per_producer
    assert flushes * 2 <= batches, f"{flushes} fsync rounds for {batches} batches"
    assert len(probe.latencies) >= 10
    assert statistics.median(probe.latencies) < 0.1
    assert max(probe.latencies) < 2
