"""Lag of a real confluent-kafka consumer group against a `logtrove serve` subprocess,
read from the broker's data directory (read-only, while it runs) and through the broker
(--bootstrap); and tag subscriptions and tag-filtered consumption through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.client import KafkaClient, remote_lag
from logtrove.groups.lag import GroupLag, LagMonitor
from logtrove.storage import Storage
from logtrove.testing import BrokerProcess, FakeClock, consume_until, free_port

T0 = 1_763_800_000_000
PER_PARTITION = 40


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    with BrokerProcess(tmp_path / "data", free_port()) as proc:
        yield proc


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def _produce(bootstrap: str, topic: str, partitions: int, tags: list[bytes] | None = None) -> None:
    """PER_PARTITION messages per partition; offset o has timestamp T0 + o s."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(PER_PARTITION):
            headers = [("tag", tags[i % len(tags)])] if tags else None
            producer.produce(topic, value=b"m%d" % i, partition=p, timestamp=T0 + i * 1000, headers=headers)
    assert producer.flush(30) == 0


def _consumer(bootstrap: str, group: str) -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )


def _take(consumer: Any, want: int, seconds: float = 30) -> list[Any]:
    got = consume_until(consumer, want, seconds, poll_s=0.2, skip_errors=True)
    assert len(got) == want, f"got {len(got)} of {want}"
    return got


def _rows(groups: list[GroupLag]) -> dict[int, tuple[int | None, int | None, int | None]]:
    (g,) = groups
    return {r.partition: (r.committed_offset, r.lag, r.time_lag_ms) for r in g.partitions()}


def test_lag_follows_commits_of_a_confluent_kafka_group(broker: BrokerProcess) -> None:
    topic, group = "orders", "billing"
    _create(broker.bootstrap, topic, 3)
    _produce(broker.bootstrap, topic, 3)
    consumer = _consumer(broker.bootstrap, group)
    consumer.subscribe([topic])
    clock = FakeClock(T0 + 100_000)
    storage = Storage.open(broker.data, read_only=True)
    monitor = LagMonitor(storage, clock=clock)
    client = KafkaClient(broker.bootstrap)
    try:
        taken = {0: 0, 1: 0}
        previous: tuple[int, int] | None = None
        for step in (5, 12, 3):
            for m in _take(consumer, 3 * step):  # messages of every partition arrive...
                if m.partition() in taken:
                    # a commit leaves the last record unconsumed, so that every step has a
                    # first unconsumed record whose age the time lag is (librdkafka may
                    # deliver all of one partition first; caught up is checked at the end)
                    taken[m.partition()] = min(max(taken[m.partition()], m.offset() + 1), PER_PARTITION - 1)
            # ...but only partitions 0 and 1 are committed: 2 stays "never committed"
            consumer.commit(
                offsets=[TopicPartition(topic, p, o) for p, o in taken.items()], asynchronous=False
            )
            monitor.refresh()
            local = _rows(monitor.lag(group, topic))
            remote = _rows(remote_lag(client, group, topic, clock=clock))
            assert local == remote
            for p, o in taken.items():
                assert local[p][:2] == (o, PER_PARTITION - o), "lag == end - committed"
                assert local[p][2] == clock.now_ms() - (T0 + o * 1000), "age of the first unconsumed"
            assert local[2] == (None, None, None), "never committed is not 0"
            (g,) = monitor.lag(group)
            assert g.never_committed == 1 and g.lag == sum(PER_PARTITION - o for o in taken.values())
            # time lag grows with the (injected) clock and falls with commits
            before = local[0][2]
            clock.advance(7_000)
            assert _rows(monitor.lag(group))[0][2] == (before or 0) + 7_000
            if previous is not None and taken[0] > previous[0]:  # a commit moved past older records
                assert before is not None and before < previous[1] + 7_000
            previous = (taken[0], before or 0)
        consumer.commit(offsets=[TopicPartition(topic, p, PER_PARTITION) for p in (0, 1)], asynchronous=False)
        monitor.refresh()
        assert {p: r for p, r in _rows(monitor.lag(group)).items() if p != 2} == {
            0: (PER_PARTITION, 0, 0),
            1: (PER_PARTITION, 0, 0),
        }
    finally:
        consumer.close()
        client.close()
        storage.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from logtrove.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_tag_subscription_and_tag_consumption_through_a_running_broker(broker: BrokerProcess) -> None:
    topic = "mixed"
    tags = [b"TagA", b"TagB", b"TagC", b"TagA", b"TagD"]
    _create(broker.bootstrap, topic, 2)
    _produce(broker.bootstrap, topic, 2, tags)
    data, boot = str(broker.data), broker.bootstrap
    locked = _cli("groups", "subscribe", "billing", topic, "--tags", "TagA", "--data", data)
    assert locked.returncode == 1 and "--bootstrap" in locked.stderr, "the broker holds the data dir"
    done = _cli("groups", "subscribe", "billing", topic, "--tags", "TagA", "--bootstrap", boot)
    assert done.returncode == 0, done.stderr
    before = json.loads(_cli("lag", "billing", "--data", data, "--json").stdout)
    assert before[0]["topics"][0]["tags"] == "TagA"
    assert before[0]["never_committed_partitions"] == 2

    consumed = _cli(
        "consume",
        topic,
        "--group",
        "billing",
        "--tags",
        "TagA",
        "--json",
        "--data",
        data,
        "--bootstrap",
        boot,
    )
    assert consumed.returncode == 0, consumed.stderr
    lines = [json.loads(line) for line in consumed.stdout.splitlines()]
    want = sum(t == b"TagA" for t in (tags * PER_PARTITION)[:PER_PARTITION]) * 2
    assert len(lines) == want
    assert all(h["value"] == "TagA" for line in lines for h in line["headers"] if h["key"] == "tag")

    for args in (["--data", data], ["--bootstrap", boot], ["--bootstrap", boot, "--data", data]):
        (g,) = json.loads(_cli("lag", "billing", "--json", *args).stdout)
        rows = g["topics"][0]["partitions"]
        assert [(r["lag"], r["committed_offset"]) for r in rows] == [(0, PER_PARTITION)] * 2, args
        if "--data" in args:
            assert g["tag_lag"] == 0
    _produce(broker.bootstrap, topic, 1, [b"TagB", b"TagA"])  # 20 TagA more on partition 0
    (g,) = json.loads(_cli("lag", "billing", "--json", "--data", data).stdout)
    assert (g["lag"], g["tag_lag"]) == (PER_PARTITION, PER_PARTITION // 2), "raw lag stays Kafka's number"
    listed = json.loads(_cli("groups", "list", "--json", "--bootstrap", boot).stdout)
    assert {"group": "billing", "subscriptions": {topic: "TagA"}}.items() <= {
        k: v for k, v in listed[0].items() if k in ("group", "subscriptions")
    }.items()
