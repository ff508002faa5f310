"""ACLs enforced by a real broker (issue 16), seen through real clients: a PLAINTEXT
connection is ``User:ANONYMOUS`` (the SASL and TLS listeners give other principals).

The ACLs are set up with ``logtrove acls`` while the broker is stopped, then changed live
through confluent-kafka's admin client; every denial is checked for its Kafka error, for
nothing having been stored, and for its audit line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from logtrove.storage import Storage
from logtrove.testing import BrokerProcess, cli_in, free_port, wait_until

ANON = "User:ANONYMOUS"


def _acls(tmp_path: Path, data: Path, *args: str) -> None:
    done = cli_in(tmp_path, "acls", "add", "--data", str(data), "-p", ANON, *args)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker with the authorizer on; ANONYMOUS may describe and write ``open``, read
    ``open`` and ``pub.*`` with group ``readers``, and alter the cluster (manage ACLs)."""
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        for name in ("open", "secret", "pub.news"):
            storage.create_topic(name, 1)
    _acls(tmp_path, data, "-o", "WRITE", "-o", "READ", "--topic", "open")
    _acls(tmp_path, data, "-o", "READ", "--topic", "pub.", "--prefixed")
    _acls(tmp_path, data, "-o", "READ", "--group", "readers")
    _acls(tmp_path, data, "-o", "ALTER", "-o", "DESCRIBE", "--cluster")
    with BrokerProcess(data, free_port(), "--authorizer") as proc:
        yield proc


def _produce(broker: BrokerProcess, topic: str) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000})
    producer.produce(topic, b"v", key=b"k", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(10)
    return errors[0]


def _consume(
    broker: BrokerProcess, topic: str, group: str, protocol: str = "classic"
) -> tuple[list[bytes], KafkaError | None]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "group.protocol": protocol,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    errors: list[KafkaError] = []

    def a_value_or_an_error() -> bool:
        msg = consumer.poll(0.5)
        if msg is None:
            return False
        if msg.error():
            errors.append(msg.error())
        else:
            values.append(msg.value())
        return True

    try:
        wait_until(a_value_or_an_error, 15, interval_s=0, what=f"a record of {topic} or an error")
    finally:
        consumer.close()
    return values, errors[0] if errors else None


def test_write_needs_write_and_a_denied_produce_stores_nothing(secured: BrokerProcess) -> None:
    assert _produce(secured, "open") is None
    for topic in ("secret", "pub.news"):  # refused by Metadata (not even described); by Produce
        err = _produce(secured, topic)
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    secured.stop()
    with Storage.open(secured.data, read_only=True) as storage:
        assert storage.log("secret", 0).log_end_offset == 0
        assert storage.log("pub.news", 0).log_end_offset == 0
        assert storage.log("open", 0).log_end_offset == 1
    log = secured.log.read_text()
    assert "denied User:ANONYMOUS from 127.0.0.1: DESCRIBE on TOPIC 'secret' (api key 3)" in log
    assert "denied User:ANONYMOUS from 127.0.0.1: WRITE on TOPIC 'pub.news' (api key 0)" in log


def test_metadata_hides_topics_that_cannot_be_described(secured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    assert set(admin.list_topics(timeout=10).topics) == {"open", "pub.news"}


def test_reading_needs_read_on_the_topic_and_the_group(secured: BrokerProcess) -> None:
    assert _produce(secured, "open") is None
    values, error = _consume(secured, "open", "readers")
    assert values == [b"v"] and error is None
    _, error = _consume(secured, "open", "strangers")
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_consumer_protocol_member_is_refused_topics_it_cannot_describe(secured: BrokerProcess) -> None:
    """Regression (librdkafka 0109 with ``group.protocol=consumer``): the heartbeat of a
    member subscribing by name to a topic it may not DESCRIBE answers
    TOPIC_AUTHORIZATION_FAILED (Kafka's KAFKA-18813) instead of joining it to the group."""
    values, error = _consume(secured, "secret", "readers", protocol="consumer")
    assert values == [] and error is not None
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    assert "DESCRIBE is needed on topics: secret" in error.str()
    assert "DESCRIBE" in secured.log.read_text() and "secret" in secured.log.read_text()  # audited
    assert _produce(secured, "open") is None
    values, error = _consume(secured, "open", "readers", protocol="consumer")
    assert values == [b"v"] and error is None  # a topic it may read still joins


def test_acls_change_live_through_the_admin_api(secured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    grant = AclBinding(
        ResourceType.TOPIC,
        "secret",
        ResourcePatternType.LITERAL,
        ANON,
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    admin.create_acls([grant])[grant].result(10)
    assert _produce(secured, "secret") is None
    found = admin.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC,
            "secret",
            ResourcePatternType.MATCH,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(10)
    assert [(b.name, b.operation) for b in found] == [("secret", AclOperation.WRITE)]
    revoke = AclBindingFilter(
        ResourceType.TOPIC,
        "secret",
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    (deleted,) = admin.delete_acls([revoke]).values()
    assert len(deleted.result(10)) == 1
    err = _produce(secured, "secret")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    secured.stop()  # and they were written down
    listed = cli_in(secured.data.parent, "acls", "list", "--data", str(secured.data), "--topic", "secret")
    assert "No ACLs." in listed.stdout


def test_topic_creation_and_deletion_need_their_operations(secured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    from confluent_kafka.admin import NewTopic

    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        admin.create_topics([NewTopic("newone", 1, 1)])["newone"].result(10)
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        admin.delete_topics(["open"])["open"].result(10)


def test_acl_apis_without_an_authorizer_say_security_is_disabled(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    grant = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        ANON,
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException, match="SECURITY_DISABLED"):
        admin.create_acls([grant])[grant].result(10)


def test_a_damaged_acl_file_keeps_the_broker_serving_closed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic("t", 1)
    (data / "acls.json").write_text("{ not json")
    with BrokerProcess(data, free_port(), "--authorizer", "--allow-everyone-if-no-acl-found") as proc:
        err = _produce(proc, "t")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert "ACL file" in proc.log.read_text() and "fixed or removed" in proc.log.read_text()
    assert (data / "acls.json").read_text() == "{ not json"
    with BrokerProcess(data, free_port(), "--authorizer", "--super-user", ANON) as proc:
        assert _produce(proc, "t") is None  # super users still pass


def test_sasl_users_are_the_principals_the_acls_name(tmp_path: Path) -> None:
    """Two SCRAM users on a SASL_PLAINTEXT listener: alice may write and read ``ledger``
    (group ``g``), bob may do nothing; bob's produce is refused, stores nothing, and bob
    does not even see the topic."""
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic("ledger", 1)
    for user in ("alice", "bob"):
        added = cli_in(
            tmp_path, "users", "add", user, "--data", str(data), "--password-stdin", input_=f"{user}-pw\n"
        )
        assert added.returncode == 0, added.stderr
    for args in (("-o", "WRITE", "-o", "READ", "--topic", "ledger"), ("-o", "READ", "--group", "g")):
        done = cli_in(tmp_path, "acls", "add", "--data", str(data), "-p", "User:alice", *args)
        assert done.returncode == 0, done.stderr
    port = free_port()
    with BrokerProcess(
        data, free_port(), "--listen", f"SASL_PLAINTEXT://127.0.0.1:{port}", "--authorizer"
    ) as proc:

        def conf(user: str) -> dict[str, str]:
            return {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": user,
                "sasl.password": f"{user}-pw",
            }

        def produce(user: str) -> KafkaError | None:
            errors: list[KafkaError | None] = []
            producer = Producer({**conf(user), "message.timeout.ms": 5000})
            producer.produce("ledger", b"entry", on_delivery=lambda err, _msg: errors.append(err))
            producer.flush(10)
            return errors[0]

        assert produce("alice") is None
        refused = produce("bob")
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert "ledger" not in AdminClient(conf("bob")).list_topics(timeout=10).topics
        assert "ledger" in AdminClient(conf("alice")).list_topics(timeout=10).topics
        consumer = Consumer({**conf("alice"), "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["ledger"])
        try:

            def a_value() -> bytes | None:
                msg = consumer.poll(0.5)
                return msg.value() if msg is not None and msg.error() is None else None

            got = wait_until(a_value, 15, interval_s=0, what="a record of ledger")
        finally:
            consumer.close()
        assert got == b"entry"
        proc.stop()
        assert "denied User:bob from 127.0.0.1: DESCRIBE on TOPIC 'ledger'" in proc.log.read_text()
    with Storage.open(data, read_only=True) as storage:
        assert storage.log("ledger", 0).log_end_offset == 1
