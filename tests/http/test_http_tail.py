"""``GET /api/v1/topics/{topic}/tail``: server-sent events of new records, filtered, with
heartbeats, a bound on how far behind a tail may fall, resumption and a clean shutdown."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from logtrove.http import HttpServer, start_in_thread
from logtrove.http.tail import TailLimits
from logtrove.storage import Storage
from logtrove.testing import wait_until

LIMITS = TailLimits(poll_interval_s=0.05, heartbeat_s=0.3, max_behind=50, max_tails=3)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    storage = Storage.open(tmp_path / "data")
    storage.create_topic("events", 2)
    started = start_in_thread(storage, "127.0.0.1:0", tail_limits=LIMITS)
    try:
        yield started
    finally:
        started.stop()
        storage.close()


class Events:
    """The events of one open stream, read line by line."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()

    def next(self) -> dict[str, str]:
        """The next event or comment: its fields (``comment`` for ``: …`` lines)."""
        event: dict[str, str] = {}
        for line in self.lines:
            if not line:
                if event:
                    return event
                continue
            name, _, value = line.partition(":")
            event[name or "comment"] = value.strip()
        raise AssertionError("the stream ended")

    def until(self, kind: str) -> dict[str, str]:
        while True:
            event = self.next()
            if event.get("event") == kind:
                return event


def produce(url: str, records: list[dict[str, object]]) -> None:
    httpx.post(
        f"{url}/api/v1/topics/events/messages", json={"records": records}, timeout=10
    ).raise_for_status()


def test_the_tail_shows_new_records_that_match_the_filter(server: HttpServer) -> None:
    produce(server.url, [{"key": "a", "value": "before the tail", "partition": 0}])
    with httpx.stream("GET", f"{server.url}/api/v1/topics/events/tail", params={"key": "a"}, timeout=5) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = Events(r)
        ready = json.loads(events.until("ready")["data"])
        assert ready == {"cursor": "0:1,1:0", "partitions": 2}
        produce(
            server.url,
            [
                {"key": "b", "value": "other key", "partition": 0},
                {"key": "a", "value": "first", "partition": 1},
                {"key": "a", "value": "second", "partition": 0},
            ],
        )
        seen = [json.loads(events.until("message")["data"]) for _ in range(2)]
    assert sorted((m["partition"], m["offset"], m["value"]) for m in seen) == [
        (0, 2, "second"),
        (1, 0, "first"),
    ]


def test_tag_and_text_filters(server: HttpServer) -> None:
    params = {"tag": "TagA", "contains": "needle"}
    with httpx.stream("GET", f"{server.url}/api/v1/topics/events/tail", params=params, timeout=5) as r:
        events = Events(r)
        events.until("ready")
        produce(
            server.url,
            [
                {"value": "needle but TagB", "headers": {"tag": "TagB"}, "partition": 0},
                {"value": "TagA, no match", "headers": {"tag": "TagA"}, "partition": 0},
                {"value": "a needle, TagA", "headers": {"tag": "TagA"}, "partition": 0},
            ],
        )
        message = json.loads(events.until("message")["data"])
    assert message["value"] == "a needle, TagA" and message["offset"] == 2


def test_an_idle_tail_sends_heartbeats(server: HttpServer) -> None:
    with httpx.stream("GET", f"{server.url}/api/v1/topics/events/tail", timeout=5) as r:
        events = Events(r)
        events.until("ready")
        assert events.next() == {"comment": "heartbeat"}


def test_a_tail_far_behind_skips_ahead_and_says_so(server: HttpServer) -> None:
    with httpx.stream(
        "GET", f"{server.url}/api/v1/topics/events/tail", params={"partition": 1}, timeout=5
    ) as r:
        events = Events(r)
        events.until("ready")
        produce(server.url, [{"value": f"r{i}", "partition": 1} for i in range(LIMITS.max_behind + 30)])
        skipped = json.loads(events.until("skipped")["data"])
        assert skipped == {"partition": 1, "from": 0, "to": LIMITS.max_behind + 30}
        produce(server.url, [{"value": "after the skip", "partition": 1}])
        assert json.loads(events.until("message")["data"])["value"] == "after the skip"


def test_a_reconnecting_client_resumes_after_the_last_event(server: HttpServer) -> None:
    with httpx.stream("GET", f"{server.url}/api/v1/topics/events/tail", timeout=5) as r:
        events = Events(r)
        events.until("ready")
        produce(server.url, [{"value": "one", "partition": 0}])
        last_id = events.until("message")["id"]
    produce(server.url, [{"value": "two", "partition": 0}, {"value": "three", "partition": 1}])
    headers = {"Last-Event-ID": last_id}
    with httpx.stream("GET", f"{server.url}/api/v1/topics/events/tail", headers=headers, timeout=5) as r:
        events = Events(r)
        events.until("ready")
        values = sorted(json.loads(events.until("message")["data"])["value"] for _ in range(2))
    assert values == ["three", "two"]


def test_shutdown_ends_open_tails(tmp_path: Path) -> None:
    storage = Storage.open(tmp_path / "data")
    storage.create_topic("events", 1)
    server = start_in_thread(storage, "127.0.0.1:0", tail_limits=LIMITS)
    ended = threading.Event()

    def follow() -> None:
        with httpx.stream("GET", f"{server.url}/api/v1/topics/events/tail", timeout=30) as r:
            for _ in r.iter_lines():
                pass
        ended.set()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    hub = server.server.config.app.state.tails
    wait_until(lambda: hub.open_tails, 10, interval_s=0.02, what="the tail opening")
    assert hub.open_tails == 1
    server.stop(timeout_s=10)
    try:
        assert not server.thread.is_alive(), "the server waited on the open tail"
        assert ended.wait(5), "the stream did not end"
        assert hub.open_tails == 0
    finally:
        storage.close()


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("/api/v1/topics/nope/tail", {}, 404),
        ("/api/v1/topics/events/tail", {"cursor": "zero:1"}, 422),
        ("/api/v1/topics/events/tail", {"cursor": "7:1"}, 422),
        ("/api/v1/topics/events/tail", {"cursor": "0:²"}, 422),
        ("/api/v1/topics/events/tail", {"cursor": "²:1"}, 422),
        ("/api/v1/topics/events/tail", {"partition": 5}, 404),
    ],
)
def test_bad_tail_requests_are_problems(
    server: HttpServer, path: str, params: dict[str, object], status: int
) -> None:
    response = httpx.get(f"{server.url}{path}", params=params, timeout=5)  # type: ignore[arg-type]
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"


def test_tails_are_limited_per_server(server: HttpServer) -> None:
    url = f"{server.url}/api/v1/topics/events/tail"
    with httpx.Client(timeout=5) as client:
        streams = [client.stream("GET", url) for _ in range(LIMITS.max_tails)]
        opened = [s.__enter__() for s in streams]
        try:
            readers = [Events(response) for response in opened]  # kept: a dropped reader closes its stream
            for reader in readers:
                reader.until("ready")
            refused = httpx.get(url, timeout=5)
            assert refused.status_code == 503
            assert "at most 3 live tails" in refused.json()["detail"]
        finally:
            for s in streams:
                s.__exit__(None, None, None)


def test_a_closed_stream_gives_its_slot_back(server: HttpServer) -> None:
    hub = server.server.config.app.state.tails
    with httpx.stream("GET", f"{server.url}/api/v1/topics/events/tail", timeout=5) as r:
        reader = Events(r)  # kept: a dropped reader's line iterator closes the stream at once
        reader.until("ready")
        assert hub.open_tails == 1
    # noticed at the next write at the latest (a heartbeat)
    wait_until(lambda: hub.open_tails == 0, 5, what="the closed tail being noticed")
