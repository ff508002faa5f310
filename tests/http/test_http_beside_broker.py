"""The HTTP API served by ``logtrove serve``: REST produce keeps the broker's durability
rules (acks after the fsync under ``--durable-acks`` and ``flush.messages=1``), and
``--http-max-body-mb`` sets the body limit."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.http.support import ServeProcess


def recovery_point(client: httpx.Client, topic: str, partition: int = 0) -> int:
    """The offset below which a partition is fsynced, from ``/metrics``."""
    text = client.get("/metrics").text
    pattern = rf'^logtrove_log_recovery_point{{topic="{re.escape(topic)}",partition="{partition}"}} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    assert found is not None, f"no recovery point for {topic}-{partition} in /metrics"
    return int(float(found.group(1)))


def serve(tmp_path: Path, *extra: str) -> Iterator[tuple[ServeProcess, httpx.Client]]:
    proc = ServeProcess(tmp_path / "data", "--no-indexer", *extra)
    proc.start()
    try:
        proc.wait_http()
        with httpx.Client(base_url=proc.url, timeout=30) as client:
            yield proc, client
    finally:
        proc.stop()


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[tuple[ServeProcess, httpx.Client]]:
    yield from serve(tmp_path, "--durable-acks")


@pytest.fixture
def small_bodies(tmp_path: Path) -> Iterator[tuple[ServeProcess, httpx.Client]]:
    yield from serve(tmp_path, "--http-max-body-mb", "1")


def produce(client: httpx.Client, topic: str, values: list[str]) -> list[int]:
    answer = client.post(f"/api/v1/topics/{topic}/messages", json={"records": [{"value": v} for v in values]})
    assert answer.status_code == 201, answer.text
    return [o["offset"] for o in answer.json()["offsets"]]


def test_rest_produce_answers_after_the_fsync_with_durable_acks(
    durable: tuple[ServeProcess, httpx.Client],
) -> None:
    _proc, client = durable
    assert client.post("/api/v1/topics", json={"name": "rest", "partitions": 1}).status_code == 201
    for n in range(5):
        offsets = produce(client, "rest", [f"v{n}-{i}" for i in range(3)])
        # the flush.ms timer (1 s) cannot have run yet: only the group commit moved it
        assert recovery_point(client, "rest") >= offsets[-1] + 1


def test_rest_produce_to_a_flush_messages_1_topic_answers_after_the_fsync(
    tmp_path: Path,
) -> None:
    for _proc, client in serve(tmp_path):
        created = client.post(
            "/api/v1/topics", json={"name": "each", "partitions": 1, "configs": {"flush.messages": "1"}}
        )
        assert created.status_code == 201, created.text
        for n in range(5):
            offsets = produce(client, "each", [f"e{n}"])
            assert recovery_point(client, "each") >= offsets[-1] + 1


def test_http_max_body_mb_sets_the_limit_of_serve(small_bodies: tuple[ServeProcess, httpx.Client]) -> None:
    proc, client = small_bodies
    assert client.post("/api/v1/topics", json={"name": "big", "partitions": 1}).status_code == 201
    value = "x" * (600 << 10)
    assert produce(client, "big", [value]) == [0]  # 600 KiB: under 1 MiB
    answer = client.post(
        "/api/v1/topics/big/messages", json={"records": [{"value": value}, {"value": value}]}
    )
    assert answer.status_code == 413
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert proc.alive()
    assert produce(client, "big", ["small"]) == [1]
