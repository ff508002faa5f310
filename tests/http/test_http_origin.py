"""DNS rebinding and cross-site requests against the HTTP API with its default settings
(no ``--http-auth``, as ``make run`` starts it): a request naming a Host the server is
not reachable by gets 421, a state-changing request from another origin gets 403, and
neither reads nor changes anything. The console's own (same-origin) requests pass."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.http.support import ServeProcess, assert_problem

from logtrove.http import HttpSecurity, HttpServer, start_in_thread
from logtrove.http.origin import HostNameError, HostPolicy, normalize_host, same_origin
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.testing import cli_in

ATTACKER = "attacker.example"


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Storage]:
    with Storage.open(tmp_path_factory.mktemp("origin") / "data") as storage:
        storage.create_topic("orders", 1)
        storage.log("orders", 0).append(build_batch([NewRecord(b"secret value", b"k")]))
        yield storage


@pytest.fixture(scope="module")
def open_api(storage: Storage) -> Iterator[HttpServer]:
    """The API as ``make run`` serves it: loopback, no credentials, writable."""
    server = start_in_thread(storage, "127.0.0.1:0")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(open_api: HttpServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=open_api.url, timeout=30) as c:
        yield c


def end_offset(storage: Storage) -> int:
    return storage.log("orders", 0).log_end_offset


def test_a_rebound_host_name_reads_and_changes_nothing(client: httpx.Client, storage: Storage) -> None:
    """A page of attacker.example that pointed its name at 127.0.0.1: its requests carry
    its own Host and Origin, as a browser sends them."""
    rebound = {
        "Host": f"{ATTACKER}:{client.base_url.port}",
        "Origin": f"http://{ATTACKER}:{client.base_url.port}",
    }
    read = assert_problem(
        client.get("/api/v1/topics/orders/partitions/0/messages", headers=rebound), 421, "unknown-host"
    )
    assert "--http-allowed-host attacker.example" in str(read["detail"])
    assert "secret value" not in str(read)
    before = end_offset(storage)
    assert_problem(
        client.post("/api/v1/topics", json={"name": "planted"}, headers=rebound), 421, "unknown-host"
    )
    produced = client.post(
        "/api/v1/topics/orders/messages", json={"records": [{"value": "x"}]}, headers=rebound
    )
    assert_problem(produced, 421, "unknown-host")
    assert not storage.has_topic("planted") and end_offset(storage) == before
    assert_problem(client.get("/ui/", headers={"Host": ATTACKER}), 421, "unknown-host")


def test_a_cross_origin_post_changes_nothing(client: httpx.Client, storage: Storage) -> None:
    """Another site's page posting to 127.0.0.1 (the browser sends the request and only
    hides the answer): refused by its Origin, or its Referer when it sends no Origin."""
    before = end_offset(storage)
    for page in (
        {"Origin": f"http://{ATTACKER}"},
        {"Referer": f"http://{ATTACKER}/page.html"},
        {"Origin": "null"},
        {"Origin": f"http://127.0.0.1:{client.base_url.port + 1}"},  # another port is another origin
    ):
        body = assert_problem(
            client.post("/api/v1/topics/orders/messages", json={"records": [{"value": "x"}]}, headers=page),
            403,
            "cross-origin",
        )
        assert "not from this server" in str(body["detail"])
        assert_problem(
            client.post("/api/v1/topics", json={"name": "planted"}, headers=page), 403, "cross-origin"
        )
        assert_problem(
            client.patch("/api/v1/topics/orders/configs", json={"set": {"retention.ms": "1"}}, headers=page),
            403,
            "cross-origin",
        )
    assert not storage.has_topic("planted") and end_offset(storage) == before
    assert "retention.ms" not in storage.topic("orders").overrides


def test_same_origin_and_local_names_are_served(client: httpx.Client, storage: Storage) -> None:
    """The console posts from its own origin; localhost names reach a loopback server."""
    port = client.base_url.port
    before = end_offset(storage)
    produced = client.post(
        "/api/v1/topics/orders/messages",
        json={"records": [{"value": "from the console"}]},
        headers={"Origin": f"http://127.0.0.1:{port}", "X-Requested-With": "console"},
    )
    assert produced.status_code == 201, produced.text
    assert end_offset(storage) == before + 1
    for host in (f"localhost:{port}", f"app.localhost:{port}", f"[::1]:{port}", "127.0.0.1"):
        assert client.get("/api/v1/topics", headers={"Host": host}).status_code == 200, host
    by_name = client.post(
        "/api/v1/topics/orders/messages",
        json={"records": [{"value": "by name"}]},
        headers={"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
    )
    assert by_name.status_code == 201, by_name.text
    assert client.get("/api/v1/topics", headers={"Host": "127.0.0.1:port"}).status_code == 400


def test_configured_host_names_are_served(storage: Storage) -> None:
    security = HttpSecurity(allowed_hosts=("logs.example.com", "*.corp.example"))
    server = start_in_thread(storage, "127.0.0.1:0", security=security)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            for host in ("logs.example.com", "LOGS.example.com.", "a.corp.example:8080"):
                assert c.get("/api/v1/health", headers={"Host": host}).status_code == 200, host
            for host in ("corp.example", "logs.example.com.attacker.example", ATTACKER):
                assert_problem(c.get("/api/v1/health", headers={"Host": host}), 421, "unknown-host")
            behind_proxy = c.post(
                "/api/v1/topics",
                json={"name": "via-proxy"},
                headers={"Host": "logs.example.com", "Origin": "https://logs.example.com"},
            )
            assert behind_proxy.status_code == 201, behind_proxy.text
    finally:
        server.stop()


def test_a_wildcard_bind_serves_ip_literals_but_not_other_names() -> None:
    wildcard = HostPolicy.of("0.0.0.0", ["logs.example.com"])
    assert (
        wildcard.allows("192.0.2.7")
        and wildcard.allows("2001:db8::1")
        and wildcard.allows("logs.example.com")
    )
    assert not wildcard.allows(ATTACKER)
    loopback = HostPolicy.of("127.0.0.1")
    assert not loopback.allows("192.0.2.7") and not loopback.allows(ATTACKER)
    assert HostPolicy.of("192.0.2.7").allows("192.0.2.7")
    assert same_origin("http://logs.example.com", "logs.example.com", 80)
    assert not same_origin("http://logs.example.com:8081", "logs.example.com", 8080)
    with pytest.raises(HostNameError):
        normalize_host("http://logs.example.com")


def test_serve_takes_allowed_and_advertised_hosts(tmp_path: Path) -> None:
    """``serve``: ``--http-allowed-host`` and the hosts of ``--advertise`` are served."""
    data = tmp_path / "data"
    Storage.open(data).close()
    serve = ServeProcess(
        data, "--http-allowed-host", "logs.example.com", "--advertise", "kafka.example.com:9092"
    )
    serve.start()
    try:
        serve.wait_http()
        with httpx.Client(base_url=serve.url, timeout=30) as c:
            for host in ("logs.example.com", "kafka.example.com"):
                assert c.get("/api/v1/topics", headers={"Host": host}).status_code == 200, host
            assert_problem(c.get("/api/v1/topics", headers={"Host": ATTACKER}), 421, "unknown-host")
    finally:
        serve.stop()


def test_a_wrong_allowed_host_is_a_usage_error(tmp_path: Path) -> None:
    result = cli_in(tmp_path, "http", "--data", str(tmp_path), "--http-allowed-host", "logs.example.com:8080")
    assert result.returncode == 2
    assert "--http-allowed-host" in result.stderr and "not a host name" in result.stderr
