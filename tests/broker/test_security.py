"""Listeners, TLS and SASL against a real broker with real clients: certificates made by
``logtrove certs``, users by ``logtrove users``, and one broker listening on PLAINTEXT,
SASL_SSL, SASL_PLAINTEXT and SSL (client certificate required) at once."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from tests.broker.secured import PASSWORD, Secured, logtrove

from logtrove.testing import SERVE, BrokerProcess, WireClient, consume_until, free_port, wait_until
from logtrove.wire import ApiKey


def _wait_for_an_error(producer: Producer, errors: list[KafkaError]) -> None:
    """Serve ``producer``'s callbacks until its ``error_cb`` filled ``errors``; a
    :class:`TimeoutError` after 10 s."""

    def reported() -> bool:
        producer.poll(0.1)
        return bool(errors)

    wait_until(reported, 10, interval_s=0, what="an error reported to error_cb")


def _confluent_roundtrip(conf: dict[str, Any], topic: str, group: str) -> tuple[list[bytes], int]:
    """Produce 20 records, consume them in ``group`` and commit; the values read and the
    offset the group committed."""
    producer = Producer(conf)
    for i in range(20):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer(
        {**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    values = [msg.value() for msg in consume_until(consumer, 20, 30, skip_errors=True)]
    consumer.commit(asynchronous=False)
    from confluent_kafka import TopicPartition

    committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    consumer.close()
    return values, committed


def test_confluent_kafka_produces_consumes_and_commits_with_scram_sha512_over_sasl_ssl(
    secured: Secured,
) -> None:
    values, committed = _confluent_roundtrip(secured.sasl_ssl_conf(), "sec-confluent", "g-confluent")
    assert values == [f"v{i}".encode() for i in range(20)]
    assert committed == 20


def test_kafka_python_produces_consumes_and_commits_with_scram_sha512_over_sasl_ssl(secured: Secured) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap_servers": f"127.0.0.1:{secured.sasl_ssl}",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": PASSWORD,
        "ssl_cafile": str(secured.certs / "ca.pem"),
    }
    producer = KafkaProducer(**conf)
    for i in range(20):
        producer.send("sec-kafka-python", f"k{i}".encode())
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer(
        "sec-kafka-python",
        group_id="g-kafka-python",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
        **conf,
    )
    values = []
    for msg in consumer:
        values.append(msg.value)
        if len(values) == 20:
            break
    consumer.commit()
    committed = consumer.committed(TopicPartition("sec-kafka-python", 0))
    consumer.close()
    assert values == [f"k{i}".encode() for i in range(20)]
    assert committed == 20


def test_aiokafka_produces_consumes_and_commits_with_scram_sha512_over_sasl_ssl(secured: Secured) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    async def run() -> tuple[list[bytes], int | None]:
        conf: dict[str, Any] = {
            "bootstrap_servers": f"127.0.0.1:{secured.sasl_ssl}",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": PASSWORD,
            "ssl_context": create_ssl_context(cafile=str(secured.certs / "ca.pem")),
        }
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait("sec-aiokafka", f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            "sec-aiokafka",
            group_id="g-aiokafka",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **conf,
        )
        await consumer.start()
        try:
            values: list[bytes] = []
            async with asyncio.timeout(30):
                async for msg in consumer:
                    assert msg.value is not None
                    values.append(msg.value)
                    if len(values) == 20:
                        break
            await consumer.commit()
            committed = await consumer.committed(TopicPartition("sec-aiokafka", 0))
        finally:
            await consumer.stop()
        return values, committed

    values, committed = asyncio.run(run())
    assert values == [f"a{i}".encode() for i in range(20)]
    assert committed == 20


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_produces_and_consumes_with_plain_over_sasl_plaintext(secured: Secured) -> None:
    sasl = [
        *("-b", f"127.0.0.1:{secured.sasl_plain}", "-X", "security.protocol=SASL_PLAINTEXT"),
        *("-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X", f"sasl.password={PASSWORD}"),
    ]
    lines = [f"line {i}" for i in range(10)]
    subprocess.run(
        ["kcat", *sasl, "-P", "-t", "sec-kcat"],
        input="\n".join(lines) + "\n",
        text=True,
        timeout=30,
        check=True,
    )
    out = subprocess.run(
        ["kcat", *sasl, "-C", "-t", "sec-kcat", "-o", "beginning", "-e"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stdout.splitlines() == lines


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_produces_and_consumes_with_scram(secured: Secured, mechanism: str) -> None:
    """kcat from Debian (librdkafka 2.0.2) as well as the newer librdkafka of confluent-kafka."""
    sasl = [
        *("-b", f"127.0.0.1:{secured.sasl_plain}", "-X", "security.protocol=SASL_PLAINTEXT"),
        *(
            "-X",
            f"sasl.mechanism={mechanism}",
            "-X",
            "sasl.username=alice",
            "-X",
            f"sasl.password={PASSWORD}",
        ),
    ]
    topic = f"sec-kcat-{mechanism.lower()}"
    lines = [f"line {i}" for i in range(10)]
    subprocess.run(
        ["kcat", *sasl, "-P", "-t", topic], input="\n".join(lines) + "\n", text=True, timeout=30, check=True
    )
    out = subprocess.run(
        ["kcat", *sasl, "-C", "-t", topic, "-o", "beginning", "-e"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stdout.splitlines() == lines


def test_metadata_advertises_the_listener_the_client_came_through(secured: Secured) -> None:
    admin = AdminClient(secured.sasl_ssl_conf())
    brokers = admin.list_topics(timeout=10).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", secured.sasl_ssl)]
    plain = AdminClient({"bootstrap.servers": secured.broker.bootstrap})
    brokers = plain.list_topics(timeout=10).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", secured.broker.port)]


def test_a_wrong_password_fails_fast_with_sasl_authentication_failed(secured: Secured) -> None:
    errors: list[KafkaError] = []
    producer = Producer({**secured.sasl_ssl_conf(password="wrong"), "error_cb": errors.append})
    started = time.monotonic()
    _wait_for_an_error(producer, errors)
    assert errors, "no error reported"
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "SCRAM-SHA-512" in errors[0].str()
    assert time.monotonic() - started < 5


def _sasl_handshake(client: WireClient, mechanism: str, version: int = 1) -> Any:
    return client.request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})


def _closed(client: WireClient) -> bool:
    try:
        return client.sock.recv(1) == b""
    except ConnectionError:
        return True


def test_plain_wrong_password_answers_58_with_a_message_then_closes(secured: Secured) -> None:
    with WireClient(secured.sasl_plain) as client:
        assert _sasl_handshake(client, "PLAIN").error_code == 0
        resp = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0nope"})
        assert resp.error_code == 58
        assert "Invalid username or password" in resp.error_message
        assert _closed(client)


def test_a_client_without_sasl_on_a_sasl_listener_is_refused(secured: Secured) -> None:
    with WireClient(secured.sasl_plain) as client:
        versions = client.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        assert versions.error_code == 0  # ApiVersions is served before authentication
        client.send_frame(
            client.encode_request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
        )
        assert _closed(client)
    # and a real client that does not speak SASL gets no metadata
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{secured.sasl_plain}"})
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_requests_before_the_end_of_authentication_close_the_connection(secured: Secured) -> None:
    with WireClient(secured.sasl_plain) as client:  # SaslAuthenticate before SaslHandshake
        assert (
            client.request(
                ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + PASSWORD.encode()}
            ).error_code
            == 34
        )
        assert _closed(client)
    with WireClient(secured.sasl_plain) as client:  # Metadata between handshake and authentication
        assert _sasl_handshake(client, "SCRAM-SHA-512").error_code == 0
        client.send_frame(
            client.encode_request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
        )
        assert _closed(client)
    with WireClient(secured.sasl_plain) as client:
        resp = _sasl_handshake(client, "GSSAPI")
        assert resp.error_code == 33  # UNSUPPORTED_SASL_MECHANISM, naming the enabled ones
        assert list(resp.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert _closed(client)


def _scram_sha256_final(client_first_bare: str, server_first: str, nonce: str) -> bytes:
    """A client-final message with the nonce ``nonce`` and a proof that is right for it."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize(
    ("echo", "accepted"),
    [
        ("{combined}", True),  # RFC 5802
        ("{client}{combined}", True),  # librdkafka before 2.6.1
        ("x{combined}", False),
        ("{client}{client}{combined}", False),
        ("{client}", False),
    ],
)
def test_scram_final_nonce_is_the_combined_one_or_librdkafkas_repeat(
    secured: Secured, echo: str, accepted: bool
) -> None:
    client_nonce = "fyko+d2lbbFgONRv9qkxdawL"
    first_bare = f"n=alice,r={client_nonce}"
    with WireClient(secured.sasl_plain) as client:
        assert _sasl_handshake(client, "SCRAM-SHA-256").error_code == 0
        first = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"n,,{first_bare}".encode()})
        assert first.error_code == 0
        server_first = bytes(first.auth_bytes).decode()
        combined = server_first.split(",")[0][2:]
        assert combined.startswith(client_nonce) and len(combined) > len(client_nonce)
        nonce = echo.format(client=client_nonce, combined=combined)
        final = client.request(
            ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": _scram_sha256_final(first_bare, server_first, nonce)}
        )
        assert final.error_code == (0 if accepted else 58), final.error_message
        if not accepted:
            assert _closed(client)


def test_hostile_sasl_bytes_get_errors_and_the_broker_keeps_serving(secured: Secured) -> None:
    for mechanism, token in [
        ("SCRAM-SHA-512", b"\xff\xfe garbage \x00"),
        ("SCRAM-SHA-256", b"n,,n=alice,r=" + b"A" * 100_000),
        ("SCRAM-SHA-512", b"p=tls-unique,,n=alice,r=abc"),
        ("PLAIN", b"\0" * 50_000),
        ("PLAIN", b"\0alice\0" + b"\xff" * 10),
    ]:
        with WireClient(secured.sasl_plain) as client:
            assert _sasl_handshake(client, mechanism).error_code == 0
            resp = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            assert resp.error_code == 58, (mechanism, token[:20])
            assert resp.error_message
            assert _closed(client)
    with WireClient(secured.sasl_plain) as client:  # a frame over 512 KiB before authentication
        client.sock.sendall(struct.pack(">i", 600 * 1024) + b"\0" * 1024)
        assert _closed(client)
    with WireClient(secured.sasl_plain) as client:  # the broker still authenticates others
        assert _sasl_handshake(client, "PLAIN").error_code == 0
        assert (
            client.request(
                ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + PASSWORD.encode()}
            ).error_code
            == 0
        )
        meta = client.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
        assert meta.brokers[0].port == secured.sasl_plain
        # re-authentication is refused (session lifetime 0), and the connection stays
        assert _sasl_handshake(client, "PLAIN").error_code == 34
        assert (
            client.request(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            ).error_code
            == 0
        )


def test_sasl_handshake_v0_takes_bare_tokens(secured: Secured) -> None:
    with WireClient(secured.sasl_plain) as client:
        assert _sasl_handshake(client, "PLAIN", version=0).error_code == 0
        client.send_frame(b"\0alice\0" + PASSWORD.encode())
        assert client.recv_frame() == b""  # an empty server token: authenticated
        meta = client.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
        assert meta.brokers[0].port == secured.sasl_plain
    with WireClient(secured.sasl_plain) as client:  # a wrong password: closed, v0 cannot say why
        assert _sasl_handshake(client, "PLAIN", version=0).error_code == 0
        client.send_frame(b"\0alice\0wrong")
        assert _closed(client)


def _mtls_conf(secured: Secured, **more: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{secured.ssl}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(secured.certs / "ca.pem"),
        **more,
    }


def test_mtls_client_certificate_works_and_its_subject_is_the_principal(secured: Secured) -> None:
    conf = _mtls_conf(
        secured,
        **{
            "ssl.certificate.location": str(secured.certs / "app-one.pem"),
            "ssl.key.location": str(secured.certs / "app-one.key"),
        },
    )
    values, committed = _confluent_roundtrip(conf, "sec-mtls", "g-mtls")
    assert len(values) == 20
    assert committed == 20
    assert "as User:CN=app-one" in secured.broker.log.read_text()


def test_mtls_listener_refuses_a_client_without_certificate(secured: Secured) -> None:
    context = ssl.create_default_context(cafile=str(secured.certs / "ca.pem"))
    with (
        pytest.raises((ssl.SSLError, ConnectionError)),
        socket.create_connection(("127.0.0.1", secured.ssl), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(struct.pack(">ihhi", 10, 18, 0, 1) + b"\xff\xff")
        if tls.recv(4) == b"":  # TLS 1.3: the refusal comes after the client's handshake
            raise ConnectionError("closed")
    admin = AdminClient(_mtls_conf(secured))
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_users_added_offline_authenticate_on_the_running_broker(secured: Secured) -> None:
    added = logtrove(
        "users", "add", "carol", "--data", str(secured.data), "--password-stdin", stdin="carol-pw\n"
    )
    assert added.returncode == 0, added.stderr
    admin = AdminClient(secured.sasl_ssl_conf("carol", "carol-pw"))
    assert admin.list_topics(timeout=10).brokers
    deleted = logtrove("users", "delete", "carol", "--data", str(secured.data))
    assert deleted.returncode == 0, deleted.stderr
    errors: list[KafkaError] = []
    producer = Producer({**secured.sasl_ssl_conf("carol", "carol-pw"), "error_cb": errors.append})
    _wait_for_an_error(producer, errors)
    assert errors
    assert errors[0].code() == KafkaError._AUTHENTICATION


def test_scram_credentials_are_described_and_altered_over_the_protocol(secured: Secured) -> None:
    admin = AdminClient(secured.sasl_ssl_conf())
    upsert = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-pw", b"salt-of-dave"
    )
    for fut in admin.alter_user_scram_credentials([upsert]).values():
        fut.result(10)
    described = {u: f.result(10) for u, f in admin.describe_user_scram_credentials(["dave", "alice"]).items()}
    assert [(i.mechanism, i.iterations) for i in described["dave"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)
    ]
    assert {i.mechanism for i in described["alice"].scram_credential_infos} == {
        ScramMechanism.SCRAM_SHA_256,
        ScramMechanism.SCRAM_SHA_512,
    }
    dave = AdminClient({**secured.sasl_ssl_conf("dave", "dave-pw"), "sasl.mechanism": "SCRAM-SHA-256"})
    assert dave.list_topics(timeout=10).brokers
    listed = logtrove("users", "list", "--data", str(secured.data), "--json")
    assert '"dave"' in listed.stdout
    deletion = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
    for fut in admin.alter_user_scram_credentials([deletion]).values():
        fut.result(10)
    with pytest.raises(Exception, match=r"RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["dave"])["dave"].result(10)


def test_a_sasl_connection_not_authenticated_in_time_is_closed_and_advertised_endpoints_apply(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    added = logtrove("users", "add", "alice", "--data", str(data), "--password-stdin", stdin=PASSWORD + "\n")
    assert added.returncode == 0, added.stderr
    sasl_port = free_port()
    extra = [
        *("--listen", f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}", "--sasl-auth-timeout-ms", "500"),
        *("--advertise", "SASL_PLAINTEXT://adv.example:1234"),
    ]
    with BrokerProcess(data, free_port(), *extra) as broker:
        with WireClient(sasl_port) as client:  # busy with ApiVersions, never authenticating
            started = time.monotonic()
            with pytest.raises(ConnectionError):
                while time.monotonic() - started < 10:
                    client.request(
                        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
                    )
                    time.sleep(0.1)
            assert time.monotonic() - started < 5
        with WireClient(sasl_port) as client:
            assert _sasl_handshake(client, "PLAIN").error_code == 0
            assert (
                client.request(
                    ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + PASSWORD.encode()}
                ).error_code
                == 0
            )
            time.sleep(1.5)  # past the deadline: an authenticated connection stays
            meta = client.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
            assert (meta.brokers[0].host, meta.brokers[0].port) == ("adv.example", 1234)
        with WireClient(broker.port) as client:
            meta = client.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
            assert (meta.brokers[0].host, meta.brokers[0].port) == ("127.0.0.1", broker.port)


def test_connections_to_a_tls_listener_count_against_the_limits_before_their_handshake(
    tmp_path: Path,
) -> None:
    """Clients that connect to a TLS port and never finish a handshake hold connections
    like any other: past --max-connections new ones are refused, and once they go the
    broker serves again."""
    certs = tmp_path / "certs"
    assert logtrove("certs", "--out", str(certs)).returncode == 0
    ssl_port = free_port()
    extra = [
        *("--listen", f"SSL://127.0.0.1:{ssl_port}", "--max-connections", "3"),
        *("--ssl-certfile", str(certs / "server.pem"), "--ssl-keyfile", str(certs / "server.key")),
    ]
    broker = BrokerProcess(tmp_path / "data", free_port(), *extra)
    # ready once it says so: a probe connection would count against the limit
    broker.ready = lambda: "(SSL)" in broker.log.read_text()  # type: ignore[method-assign]
    with broker:
        silent = [socket.create_connection(("127.0.0.1", ssl_port), timeout=5) for _ in range(3)]
        time.sleep(0.5)
        with WireClient(broker.port) as client:
            client.send_frame(
                client.encode_request(
                    ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
                )
            )
            assert _closed(client)  # refused: the three handshakes-to-be hold every connection
        for sock in silent:
            sock.close()
        time.sleep(0.5)
        with WireClient(broker.port) as client:
            versions = client.request(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            )
            assert versions.error_code == 0
        context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        with (
            socket.create_connection(("127.0.0.1", ssl_port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(struct.pack(">ihhi", 10, 18, 0, 7) + b"\xff\xff")
            size = struct.unpack(">i", tls.recv(4))[0]
            assert size > 0  # served over TLS once admitted


def _cli_with_config(
    config: str, tmp_path: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    properties = tmp_path / "client.properties"
    properties.write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGTROVE_")}
    return subprocess.run(
        [sys.executable, "-c", SERVE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={**env, "LOGTROVE_CLIENT_CONFIG": str(properties)},
    )


def test_the_cli_works_through_sasl_ssl_sasl_plaintext_and_mtls_listeners(
    secured: Secured, tmp_path: Path
) -> None:
    ca = secured.certs / "ca.pem"
    scram = f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\nsasl.password={PASSWORD}\nssl.ca.location={ca}\n"
    b = ["--bootstrap", f"127.0.0.1:{secured.sasl_ssl}"]
    out = _cli_with_config(scram, tmp_path, "topics", "create", "sec-cli", "--partitions", "2", *b)
    assert out.returncode == 0, out.stderr
    out = _cli_with_config(
        scram, tmp_path, "produce", "sec-cli", *b, stdin='{"value": "one"}\n{"value": "two"}\n'
    )
    assert out.returncode == 0, out.stderr
    plain = f"# PLAIN, no TLS\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanisms=PLAIN\nsasl.username=alice\nsasl.password={PASSWORD}\n"
    listing = _cli_with_config(
        plain, tmp_path, "topics", "list", "--json", "--bootstrap", f"127.0.0.1:{secured.sasl_plain}"
    )
    assert listing.returncode == 0, listing.stderr
    assert {"name": "sec-cli", "partitions": 2, "messages": 2} in json.loads(listing.stdout)
    mtls = f"security.protocol=SSL\nssl.ca.location={ca}\nssl.certificate.location={secured.certs / 'app-one.pem'}\nssl.key.location={secured.certs / 'app-one.key'}\n"
    out = _cli_with_config(
        mtls, tmp_path, "topics", "describe", "sec-cli", "--bootstrap", f"127.0.0.1:{secured.ssl}"
    )
    assert out.returncode == 0, out.stderr
    wrong = scram.replace(PASSWORD, "not-it")
    out = _cli_with_config(wrong, tmp_path, "topics", "list", *b)
    assert out.returncode == 1
    assert "SASL_AUTHENTICATION_FAILED" in out.stderr
    out = _cli_with_config("security.protocol=SASL_SSL\nsasl.password=x\n", tmp_path, "topics", "list", *b)
    assert out.returncode == 1
    assert "needs sasl.username" in out.stderr
