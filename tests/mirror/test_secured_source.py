"""A mirror following a secured logtrove leader: SCRAM-SHA-512 over SASL_SSL, PLAIN over
SASL_PLAINTEXT and a client certificate over SSL give the leader's batches at the leader's
offsets (``--source-config``, librdkafka's property names); a wrong password, an
untrusted certificate and a missing client certificate stop the mirror at once with the
reason, and never print the password. The leader is the one of the broker security
tests: certificates from ``logtrove certs``, user ``alice`` from ``logtrove users add``."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker.secured import PASSWORD, Secured
from tests.mirror.helpers import DEADLINE_S, mirror_once, offsets, same_partitions, served

from logtrove.client import ClientSecurity, KafkaProtocolError
from logtrove.mirror import Source, SourceError
from logtrove.storage.follow import read_follow_status
from logtrove.testing import BrokerProcess, HttpBrokerProcess, cli_in, free_port, wait_until

WRONG = "not-alices-password"


def _topic(secured: Secured, topic: str, partitions: int, n: int) -> None:
    """``topic`` on the leader with ``n`` records (half lz4, half idempotent), through its
    PLAINTEXT listener."""
    bootstrap = secured.broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(DEADLINE_S)
    errors: list[Any] = []
    for half, config in enumerate(({"compression.type": "lz4"}, {"enable.idempotence": True})):
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
        for i in range(half * n // 2, (half + 1) * n // 2):
            producer.produce(
                topic,
                key=b"k%d" % (i % 30),
                value=b"value %d" % i,
                partition=i % partitions,
                on_delivery=lambda e, _m: e and errors.append(e),
            )
            producer.poll(0)
        assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors


def _properties(path: Path, **props: str | Path) -> Path:
    path.write_text("".join(f"{name.replace('_', '.')}={value}\n" for name, value in props.items()))
    return path


def _scram(secured: Secured, path: Path, password: str = PASSWORD) -> Path:
    return _properties(
        path,
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="alice",
        sasl_password=password,
        ssl_ca_location=secured.certs / "ca.pem",
    )


def _mirrored_equal(secured: Secured, data: Path, topic: str, partitions: int) -> None:
    with served(data) as mirror:
        batches = same_partitions(secured.broker.bootstrap, mirror.bootstrap, topic, partitions)
    assert sum(len(b) for b in batches) >= partitions


def test_a_sasl_ssl_leader_is_mirrored_with_scram_sha512_batch_for_batch(
    secured: Secured, tmp_path: Path
) -> None:
    _topic(secured, "msec-scram", 3, 900)
    config = _scram(secured, tmp_path / "source.properties")
    data = tmp_path / "mirror"
    out = mirror_once(f"127.0.0.1:{secured.sasl_ssl}", data, "msec-scram", "--source-config", str(config))
    assert PASSWORD not in out.stdout + out.stderr
    _mirrored_equal(secured, data, "msec-scram", 3)


def test_a_sasl_plaintext_leader_is_mirrored_with_plain(secured: Secured, tmp_path: Path) -> None:
    _topic(secured, "msec-plain", 2, 400)
    config = _properties(
        tmp_path / "plain.properties",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanisms="PLAIN",
        sasl_username="alice",
        sasl_password=PASSWORD,
    )
    data = tmp_path / "mirror"
    mirror_once(f"127.0.0.1:{secured.sasl_plain}", data, "msec-plain", "--source-config", str(config))
    _mirrored_equal(secured, data, "msec-plain", 2)


def test_an_ssl_leader_requiring_client_certificates_is_mirrored_with_mtls(
    secured: Secured, tmp_path: Path
) -> None:
    _topic(secured, "msec-mtls", 2, 400)
    config = _properties(
        tmp_path / "mtls.properties",
        security_protocol="SSL",
        ssl_ca_location=secured.certs / "ca.pem",
        ssl_certificate_location=secured.certs / "app-one.pem",
        ssl_key_location=secured.certs / "app-one.key",
    )
    data = tmp_path / "mirror"
    mirror_once(f"127.0.0.1:{secured.ssl}", data, "msec-mtls", "--source-config", str(config))
    _mirrored_equal(secured, data, "msec-mtls", 2)


def test_a_wrong_password_stops_the_mirror_at_once_with_the_user_and_broker(
    secured: Secured, tmp_path: Path
) -> None:
    """Without ``--once`` a retried error would loop forever (the subprocess timeout)."""
    config = _scram(secured, tmp_path / "wrong.properties", password=WRONG)
    source = f"127.0.0.1:{secured.sasl_ssl}"
    out = cli_in(
        tmp_path,
        "mirror",
        "--from",
        source,
        "--data",
        str(tmp_path / "m"),
        "--source-config",
        str(config),
        timeout=60,
    )
    assert out.returncode == 1
    assert f"authentication failed for user alice at {source}" in out.stderr
    assert "retrying" not in out.stderr
    assert WRONG not in out.stdout + out.stderr
    status = read_follow_status(tmp_path / "m")  # the reason stays for topics describe, /metrics
    assert status is not None and status.state == "stopped" and status.problem is not None
    assert status.problem.reason == "authentication_failed"
    assert "sasl.password" in status.problem.action
    assert WRONG not in (tmp_path / "m" / "mirror-status.json").read_text()


def test_an_untrusted_leader_certificate_stops_the_mirror_naming_the_problem(
    secured: Secured, tmp_path: Path
) -> None:
    other = cli_in(tmp_path, "certs", "--out", str(tmp_path / "other"))
    assert other.returncode == 0, other.stderr
    config = _properties(
        tmp_path / "other-ca.properties",
        security_protocol="SSL",
        ssl_ca_location=tmp_path / "other" / "ca.pem",
    )
    source = f"127.0.0.1:{secured.ssl}"
    out = cli_in(
        tmp_path,
        "mirror",
        "--from",
        source,
        "--data",
        str(tmp_path / "m"),
        "--source-config",
        str(config),
        timeout=60,
    )
    assert out.returncode == 1
    assert f"the certificate of {source} did not verify: " in out.stderr
    status = read_follow_status(tmp_path / "m")
    assert status is not None and status.problem is not None and status.problem.reason == "tls_refused"
    assert "self-signed certificate in certificate chain" in out.stderr  # OpenSSL's reason


def test_a_leader_wanting_a_client_certificate_is_retried_with_a_hint(secured: Secured) -> None:
    """logtrove's TLS listener closes the connection without an alert (a Kafka broker sends
    one, which stops the mirror): the retried error says what may be missing."""
    security = ClientSecurity.from_properties(
        f"security.protocol=SSL\nssl.ca.location={secured.certs / 'ca.pem'}\n"
    )
    source = Source(f"127.0.0.1:{secured.ssl}", security=security)
    try:
        with pytest.raises(SourceError, match=re.escape("set ssl.certificate.location and ssl.key.location")):
            source.topics(re.compile(".*"))
    finally:
        source.close()


def test_an_unusable_source_config_is_a_usage_error_before_connecting(tmp_path: Path) -> None:
    config = _properties(
        tmp_path / "bad.properties", security_protocol="SSL", ssl_ca_location=tmp_path / "missing.pem"
    )
    out = cli_in(
        tmp_path,
        "mirror",
        "--from",
        "127.0.0.1:1",
        "--data",
        str(tmp_path / "m"),
        "--source-config",
        str(config),
    )
    assert out.returncode == 2
    assert f"--source-config {config}: ssl.ca.location {tmp_path / 'missing.pem'}" in out.stderr


def test_serve_refuses_a_follow_config_it_cannot_use_before_serving(tmp_path: Path) -> None:
    config = _properties(tmp_path / "source.properties", security_protocol="SASL_SSL")
    data = ["--data", str(tmp_path / "d"), "--listen", f"127.0.0.1:{free_port()}", "--no-http"]
    alone = cli_in(tmp_path, "serve", *data, "--follow-config", str(config), timeout=60)
    assert alone.returncode == 2
    assert "--follow-config is for --follow HOST:PORT" in alone.stderr
    follow = ["--follow", "127.0.0.1:1", "--follow-config", str(config)]
    unusable = cli_in(tmp_path, "serve", *data, *follow, timeout=60)
    assert unusable.returncode == 2
    assert "SASL_SSL needs sasl.username and sasl.password" in unusable.stderr


def test_the_password_is_not_in_the_settings_repr() -> None:
    security = ClientSecurity.from_properties(
        f"security.protocol=SASL_SSL\nsasl.username=alice\nsasl.password={PASSWORD}\n"
    )
    assert security.password == PASSWORD
    assert PASSWORD not in repr(security)


def _caught_up(leader: str, follower: str, topic: str, partitions: int) -> None:
    def same_offsets() -> bool:
        try:
            return all(offsets(follower, topic, p) == offsets(leader, topic, p) for p in range(partitions))
        except KafkaProtocolError:  # not created on the follower yet
            return False

    wait_until(same_offsets, DEADLINE_S, interval_s=0.2, what=f"the follower catching up on {topic}")


def test_serve_follow_mirrors_a_sasl_ssl_leader_and_stops_on_a_wrong_password(
    secured: Secured, tmp_path: Path
) -> None:
    _topic(secured, "msec-live", 2, 300)
    source = f"127.0.0.1:{secured.sasl_ssl}"
    config = _scram(secured, tmp_path / "source.properties")
    follow = ["--follow", source, "--follow-topics", "msec-live", "--follow-config", str(config)]
    with HttpBrokerProcess(tmp_path / "f", free_port(), free_port(), "--no-indexer", *follow) as follower:
        _caught_up(secured.broker.bootstrap, follower.bootstrap, "msec-live", 2)
        same_partitions(secured.broker.bootstrap, follower.bootstrap, "msec-live", 2)
    wrong = _scram(secured, tmp_path / "wrong.properties", password=WRONG)
    follow[-1] = str(wrong)
    with HttpBrokerProcess(tmp_path / "g", free_port(), free_port(), "--no-indexer", *follow) as follower:
        wait_until(
            lambda: "stopped: authentication failed for user alice" in follower.log.read_text(),
            DEADLINE_S,
            interval_s=0.2,
            what=lambda: f"the follower stopping on alice's password ({follower.log.read_text()})",
        )
        time.sleep(1.5)  # longer than the retry backoff (1 s): a retried refusal would show again
        with urllib.request.urlopen(f"{follower.http}/api/v1/health", timeout=10) as answer:
            assert answer.status == 200  # the broker serves on
    log = follower.log.read_text()
    assert log.count("authentication failed for user alice") == 1
    assert WRONG not in log


def test_a_mirror_user_with_read_on_a_prefix_mirrors_just_those_topics_and_their_groups(
    tmp_path: Path,
) -> None:
    """On a leader with an authorizer, the README's ACLs for the mirror's user are enough:
    READ (which implies DESCRIBE) and DESCRIBE_CONFIGS on the topics, READ on the groups;
    a topic it may not describe is not seen."""
    certs, data = tmp_path / "certs", tmp_path / "leader"
    assert cli_in(tmp_path, "certs", "--out", str(certs)).returncode == 0
    added = cli_in(
        tmp_path, "users", "add", "mirror", "--data", str(data), "--password-stdin", input_=PASSWORD + "\n"
    )
    assert added.returncode == 0, added.stderr
    acl = ["acls", "add", "-p", "User:mirror", "--prefixed", "--data", str(data)]
    for resource in (["--topic", "macl-"], ["--group", "g-macl"]):
        out = cli_in(tmp_path, *acl, "-o", "READ", "-o", "DESCRIBE_CONFIGS", *resource)
        assert out.returncode == 0, out.stderr
    port = free_port()
    tls = ["--ssl-certfile", str(certs / "server.pem"), "--ssl-keyfile", str(certs / "server.key")]
    secured_listener = ["--listen", f"SASL_SSL://127.0.0.1:{port}", *tls]
    rights = ["--authorizer", "--super-user", "User:ANONYMOUS"]  # the plaintext producer below
    with BrokerProcess(data, free_port(), *secured_listener, *rights) as leader:
        fake = Secured(leader, certs, data, port, 0, 0)
        _topic(fake, "macl-orders", 2, 200)
        _topic(fake, "hidden-orders", 1, 10)
        consumer = Consumer({"bootstrap.servers": leader.bootstrap, "group.id": "g-macl-billing"})
        consumer.commit(offsets=[TopicPartition("macl-orders", 0, 42)], asynchronous=False)
        consumer.close()
        config = _properties(
            tmp_path / "source.properties",
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username="mirror",
            sasl_password=PASSWORD,
            ssl_ca_location=certs / "ca.pem",
        )
        mirror = tmp_path / "mirror"
        mirror_once(f"127.0.0.1:{port}", mirror, ".*", "--source-config", str(config))
        with served(mirror) as copy:
            same_partitions(leader.bootstrap, copy.bootstrap, "macl-orders", 2)
        assert (mirror / "macl-orders-0").is_dir()
        assert not list(mirror.glob("hidden-orders*"))
    lag = cli_in(tmp_path, "lag", "g-macl-billing", "--json", "--data", str(mirror))
    assert lag.returncode == 0, lag.stderr
    committed = {
        (t["topic"], p["partition"]): p["committed_offset"]
        for group in json.loads(lag.stdout)
        for t in group["topics"]
        for p in t["partitions"]
    }
    assert committed[("macl-orders", 0)] == 42
