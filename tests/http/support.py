"""A live HTTP API over a real data directory: topics with keys, IDs, headers and JSON
values over several segments, a compacted topic, and a consumer group's commits."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from logtrove.groups import CommittedOffset, OffsetStore
from logtrove.http import HttpServer, start_in_thread
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.testing import BrokerProcess, HttpBrokerProcess, free_port, wait_until

BASE_TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
ORDERS_PER_PARTITION = 300
GROUP = "billing"
TAGGED_GROUP = "tagged"  # commits on orders-0 only; the tests give it a tag subscription


@dataclass(frozen=True)
class Dataset:
    """What the fixture data directory holds, for assertions."""

    path: Path
    orders: dict[int, list[NewRecord]]  # partition -> records, offset = index
    committed: dict[int, int]  # orders partition -> committed offset of GROUP


def order_record(rng: random.Random, p: int, i: int) -> NewRecord:
    n = p * 1000 + i
    user = f"user-{n % 17}"
    if n % 5 == 0:
        value = f"plain text order {n} for {user}" + (" needle-4711" if n % 23 == 0 else "")
    else:
        value = json.dumps({"order": n, "user": user, "status": ["new", "paid", "sent"][n % 3]})
    headers = [("id", f"msg-{n}".encode()), ("tag", [b"TagA", b"TagB"][n % 2])]
    if n % 7 == 0:
        headers.append(("trace", f"tr-{n % 3}".encode()))
    ts = BASE_TS + n * 1000 + rng.randint(-500, 500)
    return NewRecord(value.encode(), user.encode(), tuple(headers), ts)


def build_data(path: Path) -> Dataset:
    rng = random.Random(8)
    orders: dict[int, list[NewRecord]] = {}
    with Storage.open(path) as storage:
        storage.create_topic("orders", 3, {"segment.bytes": "8192", "index.headers": "trace"})
        for p in range(3):
            records = [order_record(rng, p, i) for i in range(ORDERS_PER_PARTITION)]
            orders[p] = records
            log = storage.log("orders", p)
            for start in range(0, len(records), 20):
                log.append(build_batch(records[start : start + 20]))
        storage.create_topic("users", 1, {"cleanup.policy": "compact"})
        storage.log("users", 0).append(
            build_batch(
                [NewRecord(f"v{i}".encode(), f"u{i % 4}".encode(), (), BASE_TS + i) for i in range(12)]
            )
        )
        storage.create_topic("binary", 1)
        storage.log("binary", 0).append(
            build_batch([NewRecord(b"\xff\xfe\x00", b"\x80k", (("h", b"\xff"),))])
        )
        store = OffsetStore(storage)
        store.load()
        committed = {0: 250, 1: 300}
        store.commit(
            GROUP,
            {("orders", p): CommittedOffset(off, -1, "", BASE_TS) for p, off in committed.items()},
        )
        store.commit(TAGGED_GROUP, {("orders", 0): CommittedOffset(100, -1, "", BASE_TS)})
    return Dataset(path, orders, committed)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return build_data(tmp_path_factory.mktemp("http-data") / "data")


@pytest.fixture(scope="session")
def live(dataset: Dataset) -> Iterator[HttpServer]:
    """A writable app over the dataset, on a free port (closed at the end)."""
    storage = Storage.open(dataset.path)
    server = start_in_thread(storage, "127.0.0.1:0")
    try:
        yield server
    finally:
        server.stop()
        storage.close()


@pytest.fixture
def client(live: HttpServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c


class ServeProcess(HttpBrokerProcess):
    """``logtrove serve`` with its HTTP API on free ports: the tests' broker harness,
    started once Kafka answers (:meth:`wait_http` then waits for the API)."""

    def __init__(self, data: Path, *extra: str) -> None:
        super().__init__(data, free_port(), free_port(), *extra)

    @property
    def kafka_port(self) -> int:
        return self.port

    @property
    def url(self) -> str:
        return self.http

    def ready(self) -> bool:
        return BrokerProcess.ready(self)

    def wait_http(self) -> None:
        wait_until(self.http_ready, 60, interval_s=0.1, what=lambda: f"the HTTP API ({self.log.read_text()})")


TIMELINE_TOPIC = "clicks"


@dataclass(frozen=True)
class Timeline:
    """A topic written through the REST API with increasing timestamps over about two
    hours, in batches that straddle minute edges, over many segments."""

    topic: str
    timestamps: dict[int, list[int]]  # partition -> timestamp of each offset

    def brute_counts(self, edges: list[int]) -> list[int]:
        """Records per bucket ``[edges[i], edges[i+1])``, by each record's timestamp."""
        counts = [0] * (len(edges) - 1)
        for stamps in self.timestamps.values():
            for ts in stamps:
                for i in range(len(counts)):
                    if edges[i] <= ts < edges[i + 1]:
                        counts[i] += 1
        return counts


@pytest.fixture(scope="session")
def timeline(live: HttpServer) -> Timeline:
    rng = random.Random(21)
    stamps: dict[int, list[int]] = {0: [], 1: []}
    with httpx.Client(base_url=live.url, timeout=30) as c:
        created = c.post(
            "/api/v1/topics",
            json={"name": TIMELINE_TOPIC, "partitions": 2, "configs": {"segment.bytes": "2500"}},
        )
        assert created.status_code == 201, created.text
        ts = BASE_TS + 5 * 3_600_000 + 17_000
        for _request in range(40):
            records = []
            for _ in range(rng.randint(5, 30)):
                ts += rng.randint(0, 20_000)
                p = rng.randrange(2)
                records.append({"partition": p, "timestamp": ts, "value": f"click at {ts}", "key": f"k{p}"})
                stamps[p].append(ts)
            c.post(f"/api/v1/topics/{TIMELINE_TOPIC}/messages", json={"records": records}).raise_for_status()
    return Timeline(TIMELINE_TOPIC, stamps)


PROBLEM = "application/problem+json"


def assert_problem(response: httpx.Response, status: int, kind: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["status"] == status
    assert body["type"] == f"urn:logtrove:problem:{kind}"
    assert body["title"] and body["detail"] and body["instance"] == response.request.url.path
    return dict(body)


Where = tuple[int, int]


def brute(dataset: Dataset, match: Callable[[NewRecord], bool]) -> set[Where]:
    return {(p, i) for p, records in dataset.orders.items() for i, r in enumerate(records) if match(r)}
