"""``logtrove http`` as a real process: read-only next to a writer that holds the data
directory, sees what the writer adds, refuses writes, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.testing import free_port, wait_until

CLI = "from logtrove.cli.main import main; main()"


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Storage]:
    storage = Storage.open(tmp_path / "data")
    storage.create_topic("events", 2)
    storage.log("events", 0).append(build_batch([NewRecord(b"first", b"k")]))
    yield storage
    storage.close()


def start_http(data: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-c", CLI, "http", "--data", str(data), "--http", f"127.0.0.1:{port}"]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def answers() -> bool:
        assert proc.poll() is None, log.read_text()
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1)
        except httpx.TransportError:
            return False
        return True

    try:
        wait_until(answers, 30, interval_s=0.1, what="logtrove http answering")
    except TimeoutError:
        stop(proc)
        raise AssertionError(f"logtrove http did not start: {log.read_text()}") from None
    return proc


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(20)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        return proc.wait(5)


def test_serves_read_only_while_a_writer_holds_the_directory(writer: Storage, tmp_path: Path) -> None:
    port = free_port()
    proc = start_http(writer.path, port, tmp_path / "http.log")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            health = client.get("/api/v1/health").json()
            assert health["read_only"] is True
            assert client.get("/api/v1/topics/events/partitions/0/offsets/0").json()["value"] == "first"
            refused = client.post("/api/v1/topics/events/messages", json={"records": [{"value": "x"}]})
            assert refused.status_code == 403
            assert refused.headers["content-type"] == "application/problem+json"
            assert client.post("/api/v1/topics", json={"name": "new"}).status_code == 403
            subscribe = client.put("/api/v1/groups/g/subscriptions/events", json={"tags": "A"})
            assert subscribe.status_code == 403

            writer.create_topic("later", 1)
            writer.log("events", 0).append(build_batch([NewRecord(b"second", b"k")]))
            wait_until(
                lambda: client.get("/api/v1/topics/later").status_code != 404,
                10,
                interval_s=0.2,
                what="the new topic showing up",
            )
            second = client.get("/api/v1/topics/events/partitions/0/offsets/1")
            assert second.status_code == 200 and second.json()["value"] == "second"
            assert client.get("/ui/lag").headers["content-type"].startswith("text/html")
    finally:
        code = stop(proc)
    assert code == 0, (tmp_path / "http.log").read_text()


@pytest.mark.parametrize("option", ["--http", "--listen"])  # --listen: the option's old name
def test_bad_listen_address_is_a_usage_error(tmp_path: Path, option: str) -> None:
    Storage.open(tmp_path / "data").close()
    done = subprocess.run(
        [sys.executable, "-c", CLI, "http", "--data", str(tmp_path / "data"), option, "nowhere"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--http: expected HOST:PORT" in done.stderr
