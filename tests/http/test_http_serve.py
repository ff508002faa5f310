"""``logtrove serve`` serves the HTTP API next to the broker: REST produce goes through
the broker (a Kafka consumer reads it), Kafka-produced records are found over HTTP, a
live consumer group shows up with its members and lag; ``--no-http`` turns it off and a
busy HTTP port does not stop the broker."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.http.support import ServeProcess

from logtrove.testing import consume_until, wait_until

kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    proc = ServeProcess(tmp_path / "data", "--indexer-flush-s", "0.5")
    proc.start()
    try:
        proc.wait_http()
        yield proc
    finally:
        proc.stop()


def consume(bootstrap: str, topic: str, count: int, group: str) -> list[tuple[bytes | None, bytes | None]]:
    consumer = kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    try:
        got = consume_until(consumer, count, 30, skip_errors=True, what=f"records of {topic}")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return [(msg.key(), msg.value()) for msg in got]


def test_rest_produce_goes_through_the_broker_and_kafka_reads_it(served: ServeProcess) -> None:
    broker, url = served, served.url
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.get("/api/v1/health").json()["read_only"] is False
        assert client.post("/api/v1/topics", json={"name": "web", "partitions": 1}).status_code == 201
        records = [{"key": f"k{i}", "value": {"i": i}, "headers": {"id": f"m{i}"}} for i in range(5)]
        produced = client.post("/api/v1/topics/web/messages", json={"records": records})
        assert produced.status_code == 201, produced.text
        got = consume(broker.bootstrap, "web", 5, "web-readers")
        assert got == [(f"k{i}".encode(), f'{{"i":{i}}}'.encode()) for i in range(5)]

        def caught_up() -> httpx.Response | None:
            group = client.get("/api/v1/groups/web-readers")
            return group if group.status_code == 200 and group.json()["lag"] == 0 else None

        group = wait_until(
            caught_up,
            10,
            interval_s=0.2,
            what=lambda: f"lag 0 for web-readers ({client.get('/api/v1/groups/web-readers').text})",
        )
        assert group.json()["partitions"][0]["committed_offset"] == 5


def test_kafka_produced_records_are_found_over_http(served: ServeProcess) -> None:
    broker, url = served, served.url
    producer = kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce("orders", key=f"user-{i % 3}", value=f"order {i}", headers=[("id", f"o-{i}")])
    assert producer.flush(30) == 0
    with httpx.Client(base_url=url, timeout=30) as client:
        page = client.get(
            "/api/v1/topics/orders/messages/by-key", params={"key": "user-1", "limit": 100}
        ).json()
        assert sorted(m["value"] for m in page["messages"]) == sorted(f"order {i}" for i in range(1, 20, 3))
        found = client.get("/api/v1/topics/orders/messages/by-id", params={"id": "o-7"}).json()
        assert [m["value"] for m in found["messages"]] == ["order 7"]
        metrics = client.get("/metrics").text
        assert 'logtrove_log_end_offset{topic="orders",partition="0"} 20' in metrics

        def index_lag_zero() -> str | None:
            text = client.get("/metrics").text
            return text if 'logtrove_index_lag_records{topic="orders",partition="0"} 0' in text else None

        metrics = wait_until(  # the indexer writes the partial block within --indexer-flush-s
            index_lag_zero,
            60,
            interval_s=0.2,
            what=lambda: f"index lag 0 in /metrics ({client.get('/metrics').text})",
        )
        assert 'logtrove_index_offset{topic="orders",partition="0"} 20' in metrics
        assert client.get("/api/v1/topics/orders/partitions/0").json()["indexed_offset"] == 20
        assert [p["indexed_offset"] for p in client.get("/api/v1/topics/orders/partitions").json()] == [20]


def test_no_http_serves_only_kafka(tmp_path: Path) -> None:
    proc = ServeProcess(tmp_path / "data", "--no-http")
    proc.start()
    try:
        time.sleep(1)
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", proc.http_port), timeout=1):
            pass
    finally:
        assert proc.stop() == 0


def test_a_busy_http_port_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    proc = ServeProcess(tmp_path / "data")
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", proc.http_port))
        blocker.listen()
        proc.start()
        try:
            wait_until(
                lambda: "no HTTP API" in proc.log.read_text(),
                60,
                interval_s=0.1,
                what=lambda: f"the 'no HTTP API' warning ({proc.log.read_text()})",
            )
            assert proc.alive()
        finally:
            assert proc.stop() == 0


def test_a_live_group_shows_its_state_and_members(served: ServeProcess) -> None:
    producer = kafka.Producer({"bootstrap.servers": served.bootstrap})
    producer.produce("live", key="k", value="v")
    assert producer.flush(30) == 0
    consumer = kafka.Consumer(
        {
            "bootstrap.servers": served.bootstrap,
            "group.id": "watchers",
            "client.id": "watcher-1",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["live"])
    try:
        deadline = time.monotonic() + 60  # for both waits together
        wait_until(lambda: consumer.poll(0.5) is not None, 60, interval_s=0, what="a message consumed")
        consumer.commit(asynchronous=False)
        with httpx.Client(base_url=served.url, timeout=30) as client:
            bodies: list[Any] = []

            def stable() -> Any:
                bodies.append(client.get("/api/v1/groups/watchers").json())
                return bodies[-1] if bodies[-1].get("state") == "Stable" else None

            body = wait_until(
                stable,
                deadline - time.monotonic(),
                interval_s=0.2,
                what=lambda: f"group watchers Stable (last answer: {bodies[-1]})",
            )
            assert body["members"] == 1 and body["member_list"][0]["client_id"] == "watcher-1"
            assert body["lag"] == 0
            listed = {g["group"]: g for g in client.get("/api/v1/groups").json()}
            assert listed["watchers"]["state"] == "Stable"
    finally:
        consumer.close()
