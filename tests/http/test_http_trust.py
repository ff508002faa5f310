"""Hostile HTTP input against a real ``logtrove serve`` (broker + HTTP API in one process):
a catastrophic regex ends quickly while Kafka keeps answering, request bodies past the
limit get 413 while they are read (memory stays small), and lone surrogates or absurd
repetition counts get 4xx problems, not 500s."""

from __future__ import annotations

import select
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.http.support import ServeProcess

from logtrove.http.limits import DEFAULT_MAX_BODY_BYTES
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.testing import WireClient
from logtrove.wire import ApiKey

EVIL = "(a+)+$"  # Python's re backtracks 2^n steps on 'a'*n + '!'
TRAP = b"a" * 30 + b"!"
BATCHES, PER_BATCH = 20, 1000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    data = tmp_path_factory.mktemp("trust") / "data"
    with Storage.open(data) as storage:
        storage.create_topic("traps", 1)
        for _ in range(BATCHES):
            storage.log("traps", 0).append(build_batch([NewRecord(TRAP) for _ in range(PER_BATCH)]))
        storage.log("traps", 0).append(build_batch([NewRecord(b"aaaa")]))
        storage.create_topic("web", 1)
    proc = ServeProcess(data)
    proc.start()
    try:
        proc.wait_http()
        yield proc
    finally:
        proc.stop()


def api_versions_latencies(port: int, probes: int = 20, gap_s: float = 0.05) -> list[float]:
    """Seconds each of ``probes`` ApiVersions requests took on one raw connection (a
    broker that answers nothing fails the probe at the socket timeout)."""
    out = []
    with WireClient(port, timeout=10) as client:
        for _ in range(probes):
            started = time.perf_counter()
            answer = client.request(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "probe", "client_software_version": "1"}
            )
            out.append(time.perf_counter() - started)
            assert answer.error_code == 0
            time.sleep(gap_s)
    return out


def test_catastrophic_regex_ends_quickly_and_kafka_keeps_answering(served: ServeProcess) -> None:
    answers: list[httpx.Response] = []
    stop = threading.Event()

    def search() -> None:
        with httpx.Client(base_url=served.url, timeout=60) as client:
            while not stop.is_set():
                answers.append(client.get("/api/v1/topics/traps/messages/search", params={"regex": EVIL}))

    searcher = threading.Thread(target=search, daemon=True)
    searcher.start()
    try:
        time.sleep(0.3)  # the first search is under way
        latencies = api_versions_latencies(served.kafka_port)
    finally:
        stop.set()
    searcher.join(90)
    assert not searcher.is_alive(), "a search did not end"
    assert statistics.median(latencies) < 0.1 and max(latencies) < 2, latencies
    assert answers
    for answer in answers:
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert [m["value"] for m in page["messages"]] == ["aaaa"]
        assert page["reason"] == "range exhausted"
        assert page["stats"]["records_scanned"] == BATCHES * PER_BATCH + 1


def _problem(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = answer.json()
    assert body["status"] == status
    return body


def test_regex_unsupported_or_absurd_repetition_is_a_422(served: ServeProcess) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        search = "/api/v1/topics/traps/messages/search"
        body = _problem(client.get(search, params={"regex": "a{99999999999}"}), 422)
        assert "repetition count 99999999999 is over the limit of 1000" in body["detail"]
        body = _problem(client.get(search, params={"regex": r"(a)\1"}), 422)
        assert "backreferences are not supported" in body["detail"] and "RE2" in body["detail"]
        body = _problem(client.get(search, params={"regex": "a(?=b)"}), 422)
        assert "lookaround" in body["detail"]


def _end_offset(client: httpx.Client, topic: str) -> int:
    (partition,) = client.get(f"/api/v1/topics/{topic}/partitions").json()
    return int(partition["log_end_offset"])


@pytest.mark.parametrize(
    ("record", "where"),
    [
        (rb'{"value": "\ud800"}', "records[0].value"),
        (rb'{"value": "ok", "key": "k\udfff"}', "records[0].key"),
        (rb'{"value": {"nested": "\ud800"}}', "records[0].value"),
        (rb'{"value": "ok", "headers": {"h": "\udc00"}}', "records[0].headers['h']"),
        (rb'{"value": "ok", "headers": [["\ud800", "v"]]}', "header name"),
    ],
)
def test_lone_surrogate_in_produced_json_is_a_422_and_writes_nothing(
    served: ServeProcess, record: bytes, where: str
) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        before = _end_offset(client, "web")
        answer = client.post(
            "/api/v1/topics/web/messages",
            content=b'{"records": [' + record + b"]}",
            headers={"content-type": "application/json"},
        )
        body = _problem(answer, 422)
        assert where in body["detail"] and "lone surrogate" in body["detail"]
        assert _end_offset(client, "web") == before
        # a percent-encoded lone surrogate in a query parameter is no 500 either
        for param in ("regex", "contains", "json_field"):
            hit = client.get(f"/api/v1/topics/web/messages/search?{param}=%ED%A0%80")
            assert hit.status_code < 500, hit.text
        assert client.get("/api/v1/topics/web/messages/by-key?key=%ED%A0%80").status_code < 500


def _vm_hwm_mb(pid: int) -> float:
    """Peak resident memory of a process, MB (``VmHWM`` in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _head(port: int, extra: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    sock.sendall(
        (
            "POST /api/v1/topics/web/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\n{extra}\r\n"
        ).encode()
    )
    return sock


def _read_answer(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError):  # closed after the answer, or never answered
        pass
    return data


def test_huge_declared_body_is_refused_before_it_is_read(served: ServeProcess) -> None:
    with _head(served.http_port, "Content-Length: 200000000000\r\n") as sock:
        sock.sendall(b'{"records": [')
        answer = _read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"application/problem+json" in answer and b"urn:logtrove:problem:body-too-large" in answer


def test_chunked_body_past_the_limit_gets_413_while_streaming(served: ServeProcess) -> None:
    assert served.proc is not None
    chunk = b"[" * 65536
    frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    cap = 4 * DEFAULT_MAX_BODY_BYTES
    sent = 0
    with _head(served.http_port, "Transfer-Encoding: chunked\r\n") as sock:
        try:
            while sent < cap and not select.select([sock], [], [], 0)[0]:
                sock.sendall(frame)
                sent += len(chunk)
                if sent % (1 << 20) == 0:
                    time.sleep(0.005)  # a slow sender
        except (BrokenPipeError, ConnectionResetError):  # the server answered and closed
            pass
        answer = _read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), (sent, answer[:200])
    assert sent < cap
    assert _vm_hwm_mb(served.proc.pid) < 300
    with httpx.Client(base_url=served.url, timeout=30) as client:  # still serving
        assert (
            client.post("/api/v1/topics/web/messages", json={"records": [{"value": "x"}]}).status_code == 201
        )
    assert max(api_versions_latencies(served.kafka_port, probes=3)) < 2
