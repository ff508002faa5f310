"""``GET /api/v1/topics/{topic}/histogram``: counts equal brute force, bad parameters are
clear 4xx problems."""

from __future__ import annotations

import httpx
import pytest
from tests.http.support import BASE_TS, Dataset, Timeline

HOUR = 3_600_000


def edges_of(body: dict) -> list[int]:  # type: ignore[type-arg]
    return [b["start_ms"] for b in body["buckets"]] + [body["buckets"][-1]["end_ms"]]


def test_whole_retention_per_minute_equals_brute_force(client: httpx.Client, timeline: Timeline) -> None:
    response = client.get(f"/api/v1/topics/{timeline.topic}/histogram", params={"bucket": "minute"})
    assert response.status_code == 200, response.text
    body = response.json()
    counts = [b["records"] for b in body["buckets"]]
    assert counts == timeline.brute_counts(edges_of(body))
    assert body["records"] == sum(len(s) for s in timeline.timestamps.values())
    assert body["bucket"] == "minute" and body["bucket_ms"] == 60_000
    sizes = client.get(f"/api/v1/topics/{timeline.topic}/partitions").json()
    assert [p["size_bytes"] for p in body["partitions"]] == [p["size_bytes"] for p in sizes]
    assert [p["records"] for p in body["partitions"]] == [len(timeline.timestamps[p]) for p in (0, 1)]
    assert all(p["segments"] > 3 for p in sizes)  # the buckets cross segment boundaries


def test_a_range_and_one_partition(client: httpx.Client, timeline: Timeline) -> None:
    start = timeline.timestamps[0][40]
    end = start + HOUR // 3
    response = client.get(
        f"/api/v1/topics/{timeline.topic}/histogram",
        params={"from": start, "to": end, "bucket": "minute", "partition": 0, "by_partition": "true"},
    )
    body = response.json()
    edges = edges_of(body)
    assert edges[0] == start and edges[-1] == end
    only_p0 = Timeline(timeline.topic, {0: timeline.timestamps[0]})
    assert body["partitions"][0]["counts"] == only_p0.brute_counts(edges)


def test_auto_buckets_cover_the_topic(client: httpx.Client, dataset: Dataset) -> None:
    body = client.get("/api/v1/topics/orders/histogram", params={"max_buckets": 50}).json()
    assert len(body["buckets"]) <= 50
    assert body["records"] == 900  # every record of the three partitions, whatever the order of timestamps
    assert body["from_ms"] <= BASE_TS + 500


def test_an_empty_topic_has_no_buckets(client: httpx.Client) -> None:
    client.post("/api/v1/topics", json={"name": "empty-histogram", "partitions": 2})
    body = client.get("/api/v1/topics/empty-histogram/histogram").json()
    assert body["buckets"] == [] and body["records"] == 0 and body["from_ms"] is None


@pytest.mark.parametrize(
    ("params", "status", "detail"),
    [
        ({"bucket": "fortnight"}, 422, "unknown bucket"),
        ({"bucket": "second", "from": BASE_TS, "to": BASE_TS + 30 * 24 * HOUR}, 422, "wider bucket"),
        ({"from": BASE_TS + HOUR, "to": BASE_TS}, 422, "empty"),
        ({"from": "yesterday"}, 422, "cannot read from"),
        ({"max_buckets": 0}, 422, "max_buckets"),
        ({"max_buckets": 5000}, 422, "max_buckets"),
    ],
)
def test_bad_parameters_are_clear_problems(
    client: httpx.Client, params: dict[str, object], status: int, detail: str
) -> None:
    response = client.get("/api/v1/topics/orders/histogram", params=params)  # type: ignore[arg-type]
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    assert detail in response.json()["detail"]


def test_unknown_topic_is_404(client: httpx.Client) -> None:
    response = client.get("/api/v1/topics/no-such/histogram")
    assert response.status_code == 404
    assert response.json()["type"] == "urn:logtrove:problem:unknown-topic"
