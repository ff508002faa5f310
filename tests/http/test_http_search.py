"""Search endpoints against a brute-force scan of what was written: key, header, ID,
position ID, time range and content (pages and NDJSON streams), with cursors."""

from __future__ import annotations

import json
import re

import httpx
from tests.http.support import BASE_TS, Dataset, Where, assert_problem, brute

from logtrove.records import NewRecord


def header(record: NewRecord, name: str) -> bytes | None:
    return next((v for k, v in record.headers if k == name), None)


def where(messages: list[dict[str, object]]) -> list[Where]:
    return [(int(str(m["partition"])), int(str(m["offset"]))) for m in messages]


def all_pages(
    client: httpx.Client, path: str, params: dict[str, object], max_pages: int = 50
) -> list[dict[str, object]]:
    """Follow ``next_cursor`` until the answer is complete; returns every message."""
    out: list[dict[str, object]] = []
    cursor = None
    for _ in range(max_pages):
        response = client.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        page = response.json()
        out += page["messages"]
        cursor = page["next_cursor"]
        if cursor is None:
            assert page["reason"] == "range exhausted"
            return out
        assert page["reason"] == "limit reached" and len(page["messages"]) == params["limit"]
    raise AssertionError("too many pages")


def test_by_key_finds_every_record_newest_first_across_pages(client: httpx.Client, dataset: Dataset) -> None:
    expected = brute(dataset, lambda r: r.key == b"user-3")
    found = all_pages(client, "/api/v1/topics/orders/messages/by-key", {"key": "user-3", "limit": 7})
    assert len(where(found)) == len(set(where(found))), "no duplicates across pages"
    assert set(where(found)) == expected
    stamps = [int(str(m["timestamp"])) for m in found]
    assert stamps == sorted(stamps, reverse=True)


def test_by_key_in_a_time_window_and_one_partition(client: httpx.Client, dataset: Dataset) -> None:
    start, end = BASE_TS + 1_050_000, BASE_TS + 1_200_000
    expected = {
        (p, i)
        for p, i in brute(dataset, lambda r: r.key == b"user-5")
        if p == 1 and start <= (dataset.orders[p][i].timestamp or 0) < end
    }
    page = client.get(
        "/api/v1/topics/orders/messages/by-key",
        params={"key": "user-5", "partition": 1, "from": start, "to": end, "limit": 1000},
    ).json()
    assert set(where(page["messages"])) == expected and expected
    assert page["cli"].startswith(
        f"logtrove query orders --key user-5 --partition 1 --from {start} --to {end}"
    )


def test_by_key_needs_exactly_one_spelling_of_the_key(client: httpx.Client) -> None:
    assert_problem(client.get("/api/v1/topics/orders/messages/by-key"), 422, "invalid-parameter")
    assert_problem(
        client.get("/api/v1/topics/orders/messages/by-key", params={"key": "a", "key_b64": "YQ=="}),
        422,
        "invalid-parameter",
    )
    binary = client.get("/api/v1/topics/binary/messages/by-key", params={"key_b64": "gGs="}).json()
    assert where(binary["messages"]) == [(0, 0)]


def test_by_indexed_header(client: httpx.Client, dataset: Dataset) -> None:
    expected = brute(dataset, lambda r: header(r, "trace") == b"tr-1")
    found = all_pages(
        client, "/api/v1/topics/orders/messages/by-header", {"name": "trace", "value": "tr-1", "limit": 20}
    )
    assert set(where(found)) == expected and expected


def test_by_client_id_and_by_position_id(client: httpx.Client) -> None:
    page = client.get("/api/v1/topics/orders/messages/by-id", params={"id": "msg-2042"}).json()
    assert where(page["messages"]) == [(2, 42)]
    (message,) = page["messages"]
    assert message["client_id"] == "msg-2042"
    position = str(message["id"])
    same = client.get(f"/api/v1/messages/{position}").json()
    assert (same["partition"], same["offset"], same["value"]) == (2, 42, message["value"])
    via_id = client.get("/api/v1/topics/orders/messages/by-id", params={"id": position}).json()
    assert where(via_id["messages"]) == [(2, 42)]
    none = client.get("/api/v1/topics/orders/messages/by-id", params={"id": "msg-999999"}).json()
    assert none["messages"] == [] and none["next_cursor"] is None
    assert_problem(client.get("/api/v1/messages/not-a-position-id"), 422, "invalid-query")


def test_time_range_returns_exactly_the_records_inside(client: httpx.Client, dataset: Dataset) -> None:
    start, end = BASE_TS + 2_100_000, BASE_TS + 2_130_000
    expected = brute(dataset, lambda r: start <= (r.timestamp or 0) < end)
    found = all_pages(
        client,
        "/api/v1/topics/orders/messages/range",
        {"from": "2026-01-01T00:35:00Z", "to": "2026-01-01T00:35:30Z", "limit": 9},
    )
    assert set(where(found)) == expected and len(found) == len(expected)
    assert_problem(
        client.get("/api/v1/topics/orders/messages/range", params={"from": end, "to": start}),
        422,
        "invalid-query",
    )


def test_content_search_pages_match_a_brute_force_scan(client: httpx.Client, dataset: Dataset) -> None:
    expected = brute(dataset, lambda r: b"needle-4711" in (r.value or b""))
    found = all_pages(
        client, "/api/v1/topics/orders/messages/search", {"contains": "needle-4711", "limit": 2}
    )
    assert set(where(found)) == expected and len(expected) >= 3
    regex = client.get(
        "/api/v1/topics/orders/messages/search", params={"regex": r"order 10[0-4]5 ", "limit": 100}
    ).json()
    pattern = re.compile(rb"order 10[0-4]5 ")
    assert set(where(regex["messages"])) == brute(dataset, lambda r: bool(pattern.search(r.value or b"")))
    paid = client.get(
        "/api/v1/topics/orders/messages/search",
        params={"json_field": "status=paid", "partition": 0, "limit": 1000},
    ).json()

    def is_paid(r: NewRecord) -> bool:
        try:
            return json.loads(r.value or b"").get("status") == "paid"
        except ValueError:
            return False

    assert set(where(paid["messages"])) == {w for w in brute(dataset, is_paid) if w[0] == 0}
    assert paid["stats"]["bytes_scanned"] > 0


def test_content_search_streams_ndjson_then_a_completion(client: httpx.Client, dataset: Dataset) -> None:
    expected = brute(dataset, lambda r: b"user-16" in (r.value or b""))
    with client.stream(
        "GET",
        "/api/v1/topics/orders/messages/search",
        params={"contains": "user-16", "limit": 1000, "stream": "true"},
    ) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    *messages, last = lines
    assert set(where(messages)) == expected
    assert last["completion"]["reason"] == "range exhausted"
    assert last["completion"]["results"] == len(expected)
    assert last["completion"]["cli"].startswith("logtrove query orders --contains user-16 --limit 1000")


def test_content_search_stops_at_its_budget_with_a_cursor(client: httpx.Client) -> None:
    page = client.get(
        "/api/v1/topics/orders/messages/search",
        params={"contains": "no such text anywhere", "budget_mb": 0.004, "partition": 0},
    ).json()
    assert page["reason"] == "budget exhausted" and page["next_cursor"]
    assert "--budget-mb 0.004" in page["cli"]


def test_content_search_input_errors(client: httpx.Client) -> None:
    base = "/api/v1/topics/orders/messages/search"
    assert_problem(client.get(base), 422, "invalid-parameter")
    assert_problem(client.get(base, params={"contains": "a", "regex": "b"}), 422, "invalid-parameter")
    body = assert_problem(client.get(base, params={"regex": "(unclosed"}), 422, "invalid-query")
    assert "unclosed" in str(body["detail"]) or "regex" in str(body["detail"]).lower()
    assert_problem(client.get(base, params={"json_field": "no-equals-sign"}), 422, "invalid-query")
    assert_problem(client.get(base, params={"contains": "x", "cursor": "garbage"}), 422, "invalid-query")
    assert_problem(client.get(base, params={"contains": "x", "from": "yesterday"}), 422, "invalid-time")
