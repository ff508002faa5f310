"""The HTTP API with authentication and ACLs, over real sockets (and real TLS): 401 without
or with wrong credentials, Basic and bearer tokens, revocation at once, 403 and audit
lines without the right, hidden topics, refused produce that stores nothing."""

from __future__ import annotations

import base64
import logging
import ssl
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute
from tests.http.secured import Secured, basic, topic_acl

from logtrove.acl import (
    AclFilter,
    AclStore,
    Operation,
    PatternType,
    ResourceType,
)
from logtrove.acl.credentials import CredentialStore
from logtrove.acl.tokens import TokenStore
from logtrove.cli.certs import make_certificates
from logtrove.http import HttpServer, HttpTls, create_app
from logtrove.http.api.tail import RECHECK_S
from logtrove.http.security import OPEN_ROUTES, RULES
from logtrove.storage import Storage

CLI = "from logtrove.cli.main import main; main()"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def logtrove(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def client(server: HttpServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


MESSAGES = "/api/v1/topics/{}/partitions/0/messages"


def test_health_is_open_and_everything_else_needs_credentials(client: httpx.Client) -> None:
    assert client.get("/api/v1/health").status_code == 200
    assert client.get("/ui/").status_code == 200
    for path in ("/api/v1/topics", MESSAGES.format("orders"), "/api/v1/groups"):
        answer = client.get(path)
        assert answer.status_code == 401, path
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert answer.headers["www-authenticate"].startswith('Basic realm="logtrove"')
    # the console's requests are offered Bearer only (a Basic challenge makes browsers prompt)
    answer = client.get("/api/v1/topics", headers={"X-Requested-With": "logtrove-console"})
    assert answer.headers["www-authenticate"] == 'Bearer realm="logtrove"'


@pytest.mark.parametrize(
    "headers",
    [
        basic("reader", "wrong"),
        {"Authorization": "Basic " + base64.b64encode(b"nobody:reader-pw").decode()},
        {"Authorization": "Basic !!notbase64"},
        bearer("lt_not-a-token"),
        {"Authorization": "Digest x"},
    ],
    ids=["wrong-password", "unknown-user", "malformed", "unknown-token", "other-scheme"],
)
def test_wrong_credentials_get_401(
    client: httpx.Client, headers: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="logtrove.audit"):
        answer = client.get(MESSAGES.format("orders"), headers=headers)
    assert answer.status_code == 401
    assert "www-authenticate" in answer.headers
    assert any("failed authentication from 127.0.0.1" in r.getMessage() for r in caplog.records)


def test_basic_with_the_scram_password_reads(client: httpx.Client) -> None:
    answer = client.get(MESSAGES.format("orders"), headers=basic("reader"))
    assert answer.status_code == 200, answer.text
    assert [m["value"] for m in answer.json()["messages"]] == ["orders-0", "orders-1", "orders-2"]


def test_cli_token_works_until_revoked(secured: Secured, client: httpx.Client) -> None:
    made = logtrove("tokens", "create", "--user", "reader", "--data", str(secured.data), "--description", "t")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    assert token.startswith("lt_")
    stored = secured.data / "http-tokens.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert token not in stored.read_text()  # only its hash
    assert client.get(MESSAGES.format("orders"), headers=bearer(token)).status_code == 200
    assert client.get(MESSAGES.format("secret"), headers=bearer(token)).status_code == 403  # the user's ACLs

    listed = logtrove("tokens", "list", "--data", str(secured.data), "--json")
    (entry,) = [t for t in __import__("json").loads(listed.stdout) if t["description"] == "t"]
    assert entry["user"] == "reader"
    revoked = logtrove("tokens", "revoke", entry["id"], "--data", str(secured.data))
    assert revoked.returncode == 0, revoked.stderr
    assert client.get(MESSAGES.format("orders"), headers=bearer(token)).status_code == 401
    assert logtrove("tokens", "revoke", entry["id"], "--data", str(secured.data)).returncode == 1


def test_revoking_a_token_ends_its_open_tail(secured: Secured, server: HttpServer) -> None:
    info, token = TokenStore(secured.data).create("reader")
    produce = {"records": [{"value": "after-revoke"}]}
    with (
        httpx.Client(base_url=server.url, timeout=30) as c,
        c.stream("GET", "/api/v1/topics/orders/tail", headers=bearer(token)) as events,
    ):
        assert events.status_code == 200
        lines = events.iter_lines()
        assert next(lines).startswith("retry:")
        TokenStore(secured.data).revoke(info.id)
        time.sleep(RECHECK_S * 1.1)  # the tail checks again at most this often
        assert (
            c.post("/api/v1/topics/orders/messages", json=produce, headers=basic("admin")).status_code == 201
        )
        rest = []
        for line in lines:  # the stream ends; on the old code it shows the record (and goes on)
            rest.append(line)
            if "after-revoke" in line:
                break
    assert 'data: {"detail": "access revoked"}' in rest
    assert not any("after-revoke" in line for line in rest)


def test_token_of_a_deleted_user_stops_working(secured: Secured, client: httpx.Client) -> None:
    store = CredentialStore(secured.data)
    store.update(lambda users: users.__setitem__("temp", dict(users["reader"])))
    _, token = TokenStore(secured.data).create("temp")
    assert client.get("/api/v1/topics", headers=bearer(token)).status_code == 200
    store.update(lambda users: users.pop("temp"))
    assert client.get("/api/v1/topics", headers=bearer(token)).status_code == 401


def test_reading_without_read_is_403_and_audited(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="logtrove.audit"):
        for path in (
            MESSAGES.format("secret"),
            "/api/v1/topics/secret/messages/search?q=secret",
            "/api/v1/topics/secret/histogram",
            "/api/v1/topics/secret",
        ):
            answer = client.get(path, headers=basic("reader"))
            assert answer.status_code == 403, path
            assert answer.headers["content-type"].startswith("application/problem+json")
    lines = [r.getMessage() for r in caplog.records if r.name == "logtrove.audit"]
    assert any("User:reader" in line and "READ on TOPIC 'secret'" in line for line in lines), lines
    assert client.get(MESSAGES.format("secret"), headers=basic("admin")).status_code == 200  # super user


def test_topic_lists_leave_out_what_the_principal_cannot_describe(client: httpx.Client) -> None:
    names = [t["name"] for t in client.get("/api/v1/topics", headers=basic("reader")).json()]
    assert names == ["orders"]
    names = [t["name"] for t in client.get("/api/v1/topics", headers=basic("admin")).json()]
    assert names == ["orders", "secret"]


def test_group_lag_shows_only_describable_groups_and_topics(client: httpx.Client) -> None:
    groups = client.get("/api/v1/groups", headers=basic("reader")).json()
    assert [g["group"] for g in groups] == ["billing"]
    detail = client.get("/api/v1/groups/billing", headers=basic("reader")).json()
    assert [t["topic"] for t in detail["topic_lags"]] == ["orders"]  # not "secret"
    assert {p["topic"] for p in detail["partitions"]} == {"orders"}
    assert client.get("/api/v1/groups/audit", headers=basic("reader")).status_code == 403
    assert client.get("/api/v1/groups/billing?topic=secret", headers=basic("reader")).status_code == 403
    history = client.get("/api/v1/groups/billing/lag-history", headers=basic("reader"))
    assert history.status_code == 200
    assert [t["topic"] for t in history.json()["topics"]] == ["orders"]
    history = client.get("/api/v1/groups/billing/lag-history", headers=basic("admin"))
    assert [t["topic"] for t in history.json()["topics"]] == ["orders", "secret"]
    everything = client.get("/api/v1/groups/billing", headers=basic("admin")).json()
    assert [t["topic"] for t in everything["topic_lags"]] == ["orders", "secret"]


def test_produce_needs_write_and_a_refused_one_stores_nothing(secured: Secured, client: httpx.Client) -> None:
    body = {"records": [{"key": "k", "value": "sneaky"}]}
    end = secured.storage.log("orders", 0).log_end_offset
    answer = client.post("/api/v1/topics/orders/messages", json=body, headers=basic("reader"))
    assert answer.status_code == 403
    assert secured.storage.log("orders", 0).log_end_offset == end
    answer = client.post("/api/v1/topics/orders/messages", json=body, headers=basic("writer"))
    assert answer.status_code == 201, answer.text
    assert secured.storage.log("orders", 0).log_end_offset == end + 1
    # creating and altering need CREATE / ALTER_CONFIGS
    create = {"name": "new-topic", "partitions": 1}
    assert client.post("/api/v1/topics", json=create, headers=basic("writer")).status_code == 403
    assert "new-topic" not in [t.name for t in secured.storage.topics()]
    alter = {"set": {"retention.ms": "1"}}
    assert (
        client.patch("/api/v1/topics/orders/configs", json=alter, headers=basic("writer")).status_code == 403
    )
    assert secured.storage.topic("orders").config.retention_ms != 1


def test_acls_written_by_another_process_apply_at_once_when_followed(
    secured: Secured, tmp_path: Path
) -> None:
    """``logtrove http`` beside ``serve``: the broker writes acls.json, the API re-reads it."""
    server = secured.server(follow_acls=True)
    grant = topic_acl("User:reader", Operation.READ, "secret")
    revoke = AclFilter(ResourceType.TOPIC, "secret", PatternType.LITERAL, "User:reader")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert c.get(MESSAGES.format("secret"), headers=basic("reader")).status_code == 403
            AclStore.load(secured.data).add([grant])  # another store, as another process
            assert c.get(MESSAGES.format("secret"), headers=basic("reader")).status_code == 200
            AclStore.load(secured.data).delete([revoke])
            assert c.get(MESSAGES.format("secret"), headers=basic("reader")).status_code == 403
    finally:
        server.stop()
        AclStore.load(secured.data).delete([revoke])  # back to the module's ACLs


def test_authentication_without_authorizer_allows_every_user(secured: Secured) -> None:
    server = secured.server(authorizer=False)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            names = [t["name"] for t in c.get("/api/v1/topics", headers=basic("reader")).json()]
            assert names == ["orders", "secret"]
            assert c.get("/api/v1/topics").status_code == 401
    finally:
        server.stop()


def test_basic_is_refused_over_plain_http_unless_allowed(secured: Secured) -> None:
    server = secured.server(basic_without_tls=False)
    try:
        answer = httpx.get(server.url + MESSAGES.format("orders"), headers=basic("reader"), timeout=30)
        assert answer.status_code == 401
        assert "HTTPS" in answer.json()["detail"]
        assert answer.headers["www-authenticate"] == 'Bearer realm="logtrove"'  # Basic not offered
    finally:
        server.stop()


def test_metrics_open_by_default_and_securable(secured: Secured, client: httpx.Client) -> None:
    assert client.get("/metrics").status_code == 200
    server = secured.server(metrics_auth=True)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert c.get("/metrics").status_code == 401
            assert c.get("/metrics", headers=basic("reader")).status_code == 403  # no CLUSTER DESCRIBE
            assert c.get("/metrics", headers=basic("admin")).status_code == 200
    finally:
        server.stop()


def test_https_with_a_logtrove_certs_ca(secured: Secured, tmp_path: Path) -> None:
    make_certificates(tmp_path, ["127.0.0.1", "localhost"], [], 1)
    tls = HttpTls(str(tmp_path / "server.pem"), str(tmp_path / "server.key"))
    server = secured.server(basic_without_tls=False, tls=tls)
    try:
        assert server.url.startswith("https://")
        verify = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        with httpx.Client(base_url=server.url, timeout=30, verify=verify) as c:
            answer = c.get(MESSAGES.format("orders"), headers=basic("reader"))
            assert answer.status_code == 200, answer.text
            assert c.get(MESSAGES.format("orders"), headers=basic("reader", "nope")).status_code == 401
        with pytest.raises(httpx.ConnectError):  # not trusted without the CA
            httpx.get(server.url + "/api/v1/health", timeout=30)
    finally:
        server.stop()


def test_console_pages_carry_a_content_security_policy(client: httpx.Client) -> None:
    csp = client.get("/ui/search").headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp


def test_the_schema_says_how_to_authenticate(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()
    assert set(schema["components"]["securitySchemes"]) == {"basic", "bearer"}
    read = schema["paths"]["/api/v1/topics/{topic}/messages/search"]["get"]
    assert read["security"] == [{"basic": []}, {"bearer": []}]
    assert {"401", "403"} <= set(read["responses"])
    assert "security" not in schema["paths"]["/api/v1/health"]["get"]


def test_every_api_route_has_an_authorization_rule(secured: Secured) -> None:
    """A new route must say which right it needs (without a rule only super users pass)."""
    app = create_app(secured.storage)
    missing = [
        (method, route.path)
        for route in app.routes
        if isinstance(route, APIRoute) and route.path not in OPEN_ROUTES
        for method in route.methods
        if (method, route.path) not in RULES
    ]
    assert missing == []


def test_serve_secures_its_http_api_with_the_brokers_acls(secured: Secured, tmp_path: Path) -> None:
    """``serve --http-auth --authorizer``: the API beside the broker uses the broker's
    ACLs and super users (the ACLs written above for the Kafka port)."""
    from tests.http.support import ServeProcess

    data = tmp_path / "data"
    with Storage.open(data) as storage:
        for topic in ("orders", "secret"):
            storage.create_topic(topic, 1)
    CredentialStore(data).update(lambda users: users.update(CredentialStore(secured.data).users()))
    AclStore.load(data).add([topic_acl("User:reader", Operation.READ, "orders")])
    serve = ServeProcess(
        data, "--http-auth", "--http-basic-without-tls", "--authorizer", "--super-user", "User:admin"
    )
    serve.start()
    try:
        serve.wait_http()
        with httpx.Client(base_url=serve.url, timeout=30) as c:
            assert c.get("/api/v1/topics").status_code == 401
            assert [t["name"] for t in c.get("/api/v1/topics", headers=basic("reader")).json()] == ["orders"]
            body = {"records": [{"value": "x"}]}
            assert (
                c.post("/api/v1/topics/orders/messages", json=body, headers=basic("reader")).status_code
                == 403
            )
            assert (
                c.post("/api/v1/topics/secret/messages", json=body, headers=basic("admin")).status_code == 201
            )
        assert "denied User:reader" in serve.log.read_text()  # the audit line
    finally:
        assert serve.stop() == 0


def test_serve_refuses_basic_without_tls_on_a_public_address(tmp_path: Path) -> None:
    out = logtrove(
        "serve",
        "--data",
        str(tmp_path / "d"),
        "--http",
        "0.0.0.0:0",
        "--http-auth",
        "--http-basic-without-tls",
    )
    assert out.returncode == 2
    assert "loopback" in out.stderr
