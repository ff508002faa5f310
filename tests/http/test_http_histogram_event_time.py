"""The topic histogram with event-time producers: timestamps out of order.

A confluent-kafka producer writes three hours of records, each stamped at a random time
within its hour (what producers with their own clocks, or replays, give). Every 5-minute
bucket of the histogram, through the HTTP route the console draws from and through
:func:`logtrove.query.histogram`, must equal a brute-force count of the records'
timestamps (every record decoded), and the time-range search a bar's click opens must
return exactly the records the bar counted. Both before the derived indexes exist and
after they are built in small blocks (so that blocks, the unindexed tail and single
batches all settle some of the counts).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import httpx
import pytest
from tests.http.support import ServeProcess

from logtrove.query import histogram, pick_bucket
from logtrove.storage import Storage
from logtrove.storage.derived.indexer import PartitionIndexer

kafka = pytest.importorskip("confluent_kafka")

TOPIC = "events"
PARTITIONS = 2
HOUR = 3_600_000
FIVE_MINUTES = 300_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
PER_HOUR = 600


def produce_event_times(bootstrap: str) -> list[int]:
    """Three hours of records, each at a random time within its hour, the hours in order
    and the records within an hour not; returns the timestamps produced."""
    rng = random.Random(37)
    producer = kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 50})
    stamps = []
    failures: list[object] = []
    for hour in range(3):
        for i in range(PER_HOUR):
            ts = T0 + hour * HOUR + rng.randrange(HOUR)
            stamps.append(ts)
            producer.produce(
                TOPIC,
                value=f"event {hour}-{i}".encode(),
                partition=i % PARTITIONS,
                timestamp=ts,
                on_delivery=lambda err, _msg: failures.append(err) if err else None,
            )
            producer.poll(0)
    assert producer.flush(30) == 0
    assert failures == []
    return stamps


def brute_force(data: Path) -> list[int]:
    """Every record's timestamp, every record decoded."""
    with Storage.open(data, read_only=True) as storage:
        return [r.timestamp for p in range(PARTITIONS) for r in storage.log(TOPIC, p).records()]


def per_bucket(stamps: list[int], edges: list[int]) -> list[int]:
    counts = [0] * (len(edges) - 1)
    for ts in stamps:
        for i in range(len(counts)):
            if edges[i] <= ts < edges[i + 1]:
                counts[i] += 1
    return counts


def search_count(client: httpx.Client, start: int, end: int) -> int:
    """How many records the range search of ``[start, end)`` returns (every page), each
    checked to be stamped inside it."""
    found, cursor = 0, None
    for _page in range(100):
        params: dict[str, str | int] = {"from": start, "to": end, "limit": 1000}
        if cursor is not None:
            params["cursor"] = cursor
        page = client.get(f"/api/v1/topics/{TOPIC}/messages/range", params=params)
        assert page.status_code == 200, page.text
        body = page.json()
        assert all(start <= m["timestamp"] < end for m in body["messages"])
        found += len(body["messages"])
        cursor = body.get("next_cursor")
        if cursor is None:
            return found
    raise AssertionError("the range search did not end within 100 pages")


def check_http(data: Path, stamps: list[int]) -> dict[str, object]:
    proc = ServeProcess(data, "--no-indexer")
    proc.start()
    try:
        proc.wait_http()
        with httpx.Client(base_url=proc.url, timeout=60) as client:
            params = {"from": T0, "to": T0 + 3 * HOUR, "bucket": "5 minutes", "max_buckets": 240}
            answer = client.get(f"/api/v1/topics/{TOPIC}/histogram", params=params)
            assert answer.status_code == 200, answer.text
            body = answer.json()
            edges = [b["start_ms"] for b in body["buckets"]] + [body["buckets"][-1]["end_ms"]]
            assert len(edges) == 37 and all(b - a == FIVE_MINUTES for a, b in itertools.pairwise(edges))
            counts = [b["records"] for b in body["buckets"]]
            assert counts == per_bucket(stamps, edges)
            assert body["records"] == len(stamps)
            for bar in body["buckets"][::5]:  # a bar's click searches exactly what it counted
                assert search_count(client, bar["start_ms"], bar["end_ms"]) == bar["records"]
            whole = client.get(f"/api/v1/topics/{TOPIC}/histogram").json()
            assert whole["records"] == len(stamps)  # the topic's span covers its oldest record
            assert whole["from_ms"] <= min(stamps)
            return body  # type: ignore[no-any-return]
    finally:
        proc.stop()


def check_function(data: Path, stamps: list[int]) -> None:
    plan = pick_bucket(T0, T0 + 3 * HOUR, "5 minutes", 2000)
    with Storage.open(data, read_only=True) as storage:
        logs = [storage.log(TOPIC, p) for p in range(PARTITIONS)]
        found = histogram(logs, plan.edges)
    assert list(found.counts) == per_bucket(stamps, list(plan.edges))
    assert all(0 <= d <= n for d, n in zip(found.decoded, found.counts, strict=True))


def test_event_time_buckets_equal_brute_force_and_the_bar_search(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = ServeProcess(data, "--no-indexer")
    proc.start()
    try:
        proc.wait_http()
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            created = client.post(
                "/api/v1/topics",
                json={
                    "name": TOPIC,
                    "partitions": PARTITIONS,
                    "configs": {"segment.bytes": "16384", "retention.ms": "-1"},
                },
            )
            assert created.status_code == 201, created.text
        produced = produce_event_times(proc.bootstrap)
    finally:
        proc.stop()
    stamps = brute_force(data)
    assert Counter(stamps) == Counter(produced)
    assert stamps != sorted(stamps)  # out of order, as the producer wrote them

    unindexed = check_http(data, stamps)
    check_function(data, stamps)
    assert sum(b["decoded"] for b in unindexed["buckets"]) > 0  # type: ignore[attr-defined]

    with Storage.open(data) as storage:  # blocks of 150 records, the last 100 left unindexed
        for p in range(PARTITIONS):
            log = storage.log(TOPIC, p)
            PartitionIndexer(log, block_records=150).step(log.log_end_offset - 100)
    check_http(data, stamps)
    check_function(data, stamps)
