"""Lag over time: ``lag-history.jsonl`` keeps its window and survives restarts, the sampler
records commits as they happen, and the console's lag chart shows a real consumer group
falling behind and catching up."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.http.browser import ARTIFACTS
from tests.http.support import ServeProcess

from logtrove.groups import CommittedOffset, OffsetStore
from logtrove.http import start_in_thread
from logtrove.http.lag_history import LagHistory
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.testing import consume_until, wait_until

T0 = 1_767_225_600_000


def test_history_keeps_its_window_and_skips_a_torn_line(tmp_path: Path) -> None:
    history = LagHistory(tmp_path, window_s=10)
    for i in range(40):
        history.append(T0 + i * 1000, [("g", "t", i, None)])
    with history.path.open("a") as f:
        f.write('{"t": 17672256')  # a crash mid-append
    reopened = LagHistory(tmp_path, window_s=10)  # a restart reads what was kept
    points = reopened.points("g")["t"]
    assert points[-1].lag == 39
    assert T0 + 39_000 - points[0].t <= 2 * 10_000  # never more than two windows
    assert [p.lag for p in points] == list(range(points[0].lag, 40))
    reopened.append(T0 + 40_000, [("g", "t", 40, 5)])
    assert reopened.points("g")["t"][-1].lag == 40
    assert reopened.points("other") == {}


def test_the_sampler_records_lag_as_commits_move(tmp_path: Path) -> None:
    storage = Storage.open(tmp_path / "data")
    storage.create_topic("t", 1)
    storage.log("t", 0).append(build_batch([NewRecord(b"v", None, (), T0 + i) for i in range(30)]))
    store = OffsetStore(storage)
    store.load()
    store.commit("g", {("t", 0): CommittedOffset(10, -1, "", T0)})
    server = start_in_thread(storage, "127.0.0.1:0", lag_sample_interval_s=0.1)
    try:
        url = f"{server.url}/api/v1/groups/g/lag-history"
        wait_for_lag(url, 20)
        store.commit("g", {("t", 0): CommittedOffset(30, -1, "", T0)})
        lags = wait_for_lag(url, 0)
        assert lags.index(20) < len(lags) - 1 - lags[::-1].index(0)
        assert httpx.get(url).json()["sampling"] is True
    finally:
        server.stop()
        storage.close()
    lines = (tmp_path / "data" / "lag-history.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["lags"] == [["g", "t", 0, 0]]


def wait_for_lag(url: str, value: int) -> list[int]:
    def lags() -> list[int]:
        topics = httpx.get(url, timeout=5).json()["topics"]
        return [p["lag"] for p in topics[0]["points"]] if topics else []

    def at_value() -> list[int] | None:
        seen = lags()
        return seen if seen and seen[-1] == value else None

    return wait_until(
        at_value, 15, interval_s=0.1, what=lambda: f"lag {value} last in the history ({lags()})"
    )


kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    proc = ServeProcess(tmp_path / "data", "--no-indexer", "--lag-sample-s", "0.2")
    proc.start()
    try:
        proc.wait_http()
        yield proc
    finally:
        proc.stop()


def consume_and_commit(consumer: Any, count: int) -> None:
    consume_until(consumer, count, 30, skip_errors=True)
    consumer.commit(asynchronous=False)


def test_lag_chart_shows_a_consumer_falling_behind_then_catching_up(page: Any, served: ServeProcess) -> None:
    url = served.url
    with httpx.Client(base_url=url, timeout=30) as client:
        client.post("/api/v1/topics", json={"name": "work", "partitions": 1}).raise_for_status()

        def produce(n: int) -> None:
            records = [{"value": f"job {i}"} for i in range(n)]
            client.post("/api/v1/topics/work/messages", json={"records": records}).raise_for_status()

        produce(50)
        consumer = kafka.Consumer(
            {
                "bootstrap.servers": served.bootstrap,
                "group.id": "workers",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,  # commits the records polled: 10, then all
            }
        )
        try:
            consumer.subscribe(["work"])
            consume_and_commit(consumer, 10)  # it started, then stalls while the producer goes on
            history = "/api/v1/groups/workers/lag-history"
            wait_for_lag(f"{url}{history}", 40)
            produce(100)
            wait_for_lag(f"{url}{history}", 140)
            consume_and_commit(consumer, 140)  # resumed: it catches up
            wait_for_lag(f"{url}{history}", 0)
        finally:
            consumer.close()
    page.goto(f"{url}/ui/lag?group=workers")
    page.locator("#lag-history-table tbody tr").first.wait_for(state="attached")
    page.locator("#lag-chart canvas").wait_for()
    lags = page.locator("#lag-history-table tbody tr[data-topic=work]").evaluate_all(
        "rows => rows.map(r => Number(r.dataset.lag))"
    )
    peak = lags.index(max(lags))
    assert max(lags) == 140
    assert any(lag < 140 for lag in lags[:peak])  # it was behind by less before: falling behind
    assert lags[-1] == 0 and peak < len(lags) - 1  # then caught up
    drawn = page.locator("#lag-chart").evaluate("box => Array.from(box.chart.data[1])")
    assert [v for v in drawn if v is not None] == lags
    page.screenshot(path=str(ARTIFACTS / "lag_over_time.png"), full_page=True)
