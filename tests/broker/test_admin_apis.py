"""Admin APIs through real clients: CreateTopics, DeleteTopics, DescribeConfigs,
IncrementalAlterConfigs, DeleteRecords, ListGroups, DescribeGroups; and idempotent
producers' de-duplication on the wire."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kio.schema.errors import ErrorCode
from tests.broker import clients

from logtrove.records import NewRecord, build_batch
from logtrove.testing import BrokerProcess, WireClient, wait_until
from logtrove.wire import ApiKey


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_create_describe_alter_delete_topic(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    admin.create_topics([NewTopic("cfg", 3, 1, config={"retention.ms": "3600000"})])["cfg"].result(10)
    dup = admin.create_topics([NewTopic("cfg", 1, 1)])["cfg"]
    try:
        dup.result(10)
        raise AssertionError("creating an existing topic must fail")
    except Exception as exc:
        assert "TOPIC_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc)

    md = admin.list_topics(timeout=10)
    assert len(md.topics["cfg"].partitions) == 3

    res = ConfigResource(ResourceType.TOPIC, "cfg")
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.ms"].is_default is False

    change = ConfigResource(
        ResourceType.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([change])[change].result(10)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["retention.ms"].value == "604800000"
    assert configs["segment.bytes"].value == "1048576"

    bad = ConfigResource(
        ResourceType.TOPIC,
        "cfg",
        incremental_configs=[ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    try:
        admin.incremental_alter_configs([bad])[bad].result(10)
        raise AssertionError("unknown config must be refused")
    except Exception as exc:
        assert "INVALID_CONFIG" in str(exc) or "unknown topic config" in str(exc)

    admin.delete_topics(["cfg"])["cfg"].result(10)
    assert "cfg" not in admin.list_topics(timeout=10).topics


def test_delete_records_moves_the_log_start(shared_broker: BrokerProcess) -> None:
    messages: list[clients.Message] = [(None, f"r{i}".encode(), []) for i in range(40)]
    clients.produce_confluent(
        shared_broker.bootstrap, "trim", messages, **{"linger.ms": 0, "batch.num.messages": 1}
    )
    admin = _admin(shared_broker)
    result = admin.delete_records([TopicPartition("trim", 0, 25)])
    deleted = next(iter(result.values())).result(10)
    assert deleted.low_watermark == 25
    got = clients.consume_confluent(shared_broker.bootstrap, "trim", 15)
    assert [v for _, v, _ in got] == [f"r{i}".encode() for i in range(25, 40)]


def test_groups_are_listed_and_described(shared_broker: BrokerProcess) -> None:
    clients.produce_confluent(shared_broker.bootstrap, "listed", [(b"k", b"v", [])])
    consumer = KafkaConsumer(
        "listed",
        bootstrap_servers=shared_broker.bootstrap,
        group_id="lister",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    wait_until(
        lambda: [r for rs in consumer.poll(timeout_ms=200).values() for r in rs],
        30,
        interval_s=0,
        what="a record of listed",
    )
    consumer.commit()
    admin = _admin(shared_broker)
    try:
        described = admin.describe_consumer_groups(["lister"])["lister"].result(10)
        assert described.state.name == "STABLE"
        assert len(described.members) == 1
    finally:
        consumer.close()
    listed = admin.list_consumer_groups().result(10)
    assert "lister" in {g.group_id for g in listed.valid}
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("lister")])
    assert [tp.offset for tp in next(iter(committed.values())).result(10).topic_partitions] == [1]


def _produce_batch(client: WireClient, topic: str, pid: int, seq: int, value: bytes) -> tuple[int, int]:
    batch = bytes(build_batch([NewRecord(value)], producer_id=pid, producer_epoch=0, base_sequence=seq))
    resp = client.request(
        ApiKey.PRODUCE,
        9,
        {
            "acks": -1,
            "timeout": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), part.base_offset


def test_idempotent_retries_are_not_appended_twice(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as client:
        client.request(ApiKey.METADATA, 12, {"topics": [{"name": "idem"}], "allow_auto_topic_creation": True})
        pid = client.request(
            ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60000}
        ).producer_id
        assert pid >= 0
        assert _produce_batch(client, "idem", pid, 0, b"a") == (0, 0)
        assert _produce_batch(client, "idem", pid, 1, b"b") == (0, 1)
        assert _produce_batch(client, "idem", pid, 1, b"b") == (0, 1)  # a retry: same offset, not appended
        assert _produce_batch(client, "idem", pid, 5, b"x")[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        assert _produce_batch(client, "idem", pid, 2, b"c") == (0, 2)
        assert client.list_offsets("idem", 0, -1).offset == 3


def test_idempotent_retry_after_a_restart_is_recognised(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        client.request(
            ApiKey.METADATA, 12, {"topics": [{"name": "idem2"}], "allow_auto_topic_creation": True}
        )
        pid = client.request(
            ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60000}
        ).producer_id
        for seq in range(3):
            assert _produce_batch(client, "idem2", pid, seq, b"v%d" % seq) == (0, seq)
    broker.stop()
    broker.start()
    with WireClient(broker.port) as client:
        assert _produce_batch(client, "idem2", pid, 2, b"v2") == (0, 2)  # the retry: not appended again
        assert _produce_batch(client, "idem2", pid, 3, b"v3") == (0, 3)
        assert _produce_batch(client, "idem2", pid, 9, b"v9")[0] == 45
        assert client.list_offsets("idem2", 0, -1).offset == 4


def test_manual_replica_assignment_naming_this_broker_is_accepted(shared_broker: BrokerProcess) -> None:
    """Issue 14, finding 6 (librdkafka 0081): an assignment that names only this broker
    is served; one naming another broker is INVALID_REPLICA_ASSIGNMENT with a reason."""
    admin = _admin(shared_broker)
    (me,) = admin.list_topics(timeout=10).brokers
    # confluent-kafka 2.16 refuses replica_assignment locally, so kafka-python creates
    kp = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        kp.create_topics([KpNewTopic("assigned", replica_assignments={0: [me], 1: [me], 2: [me]})])
        assert len(admin.list_topics("assigned", timeout=10).topics["assigned"].partitions) == 3
        away = KpNewTopic("assigned-away", replica_assignments={0: [me], 1: [me + 1]})
        result = kp.create_topics([away], raise_errors=False)
        ((name, code, message),) = [
            (t["name"], t["error_code"], t["error_message"]) for t in result["topics"]
        ]
        assert (name, code) == ("assigned-away", ErrorCode.invalid_replica_assignment)
        assert "single broker" in message
    finally:
        kp.close()

    admin.create_partitions([NewPartitions("assigned", 5, replica_assignment=[[me], [me]])])[
        "assigned"
    ].result(10)
    assert len(admin.list_topics("assigned", timeout=10).topics["assigned"].partitions) == 5
    wrong = admin.create_partitions([NewPartitions("assigned", 6, replica_assignment=[[me + 7]])])["assigned"]
    error = wrong.exception(10)
    assert error is not None and error.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
