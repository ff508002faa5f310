"""Answers logtrove gives as Apache Kafka 4.4 gives them, each one a difference the Java
client's differential scenarios (``tests/apache_kafka``) found: ListOffsets' special
timestamps and its not-found answer, CreateTopics' non-positive partition counts and
replication factors, DescribeGroups on a consumer group whose members all left, and the
types DescribeConfigs gives."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kio.schema.errors import ErrorCode

from logtrove.testing import BrokerProcess, WireClient, consume_until
from logtrove.wire import ApiKey
from logtrove.wire.requests import list_offsets_body

T0 = 1_700_000_000_000


def _produce(broker: BrokerProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=0, timestamp=T0 + i)
    assert producer.flush(30) == 0


def test_list_offsets_special_timestamps_and_not_found(shared_broker: BrokerProcess) -> None:
    """-4 (earliest local) is the log start offset with no timestamp; -5 (latest tiered)
    is offset -1 without a leader epoch, as Kafka answers with remote storage off; a
    timestamp past every record is -1 with leader epoch -1."""
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_topics([NewTopic("answers-offsets", 1, 1)])["answers-offsets"].result(30)
    _produce(shared_broker, "answers-offsets", 5)
    with WireClient(shared_broker.port) as client:

        def ask(timestamp: int) -> tuple[int, int, int, int]:
            body = list_offsets_body("answers-offsets", [0], timestamp)
            part = client.request(ApiKey.LIST_OFFSETS, 9, body).topics[0].partitions[0]
            return int(part.error_code), part.offset, part.timestamp, part.leader_epoch

        assert ask(-4) == (0, 0, -1, 0)
        assert ask(-5) == (0, -1, -1, -1)
        assert ask(T0 + 99) == (0, -1, -1, -1)
        assert ask(T0 + 3) == (0, 3, T0 + 3, 0)
        assert ask(-2) == (0, 0, -1, 0)


def test_create_topics_refuses_non_positive_counts(shared_broker: BrokerProcess) -> None:
    """Zero partitions, or a replication factor of zero, is refused (only -1 means the
    default); nothing is created."""
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    zero_partitions = admin.create_topics([NewTopic("answers-zero-p", 0, 1)])["answers-zero-p"]
    assert zero_partitions.exception(30).args[0].code() == ErrorCode.invalid_partitions
    zero_rf = admin.create_topics([NewTopic("answers-zero-rf", 1, 0)])["answers-zero-rf"]
    assert zero_rf.exception(30).args[0].code() == ErrorCode.invalid_replication_factor
    topics = admin.list_topics(timeout=10).topics
    assert "answers-zero-p" not in topics
    assert "answers-zero-rf" not in topics
    defaults = admin.create_topics([NewTopic("answers-default", -1, -1)])["answers-default"]
    assert defaults.result(30) is None


def test_an_emptied_consumer_group_is_not_described_as_simple(shared_broker: BrokerProcess) -> None:
    """A classic group whose members all left keeps its protocol type: DescribeGroups
    says ``consumer``, so Kafka's Admin does not call it a simple group."""
    _produce(shared_broker, "answers-group", 2)
    consumer = Consumer(
        {
            "bootstrap.servers": shared_broker.bootstrap,
            "group.id": "answers-g",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["answers-group"])
    consume_until(consumer, 2, 60)
    consumer.commit(asynchronous=False)
    consumer.close()
    with WireClient(shared_broker.port) as client:
        deadline = time.monotonic() + 30
        while True:
            group = client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["answers-g"]}).groups[0]
            if group.group_state == "Empty" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert (group.group_state, group.protocol_type, list(group.members)) == ("Empty", "consumer", [])


def test_described_configs_carry_kafkas_types(shared_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_topics([NewTopic("answers-configs", 1, 1)])["answers-configs"].result(30)
    resource = ConfigResource(ResourceType.TOPIC, "answers-configs")
    entries = admin.describe_configs([resource])[resource].result(30)
    with WireClient(shared_broker.port) as client:
        body = {
            "resources": [
                {"resource_type": 2, "resource_name": "answers-configs", "configuration_keys": None}
            ],
            "include_synonyms": False,
            "include_documentation": False,
        }
        answer = client.request(ApiKey.DESCRIBE_CONFIGS, 4, body).results[0]
    types = {c.name: int(c.config_type) for c in answer.configs}
    assert set(types) == set(entries)
    assert types["retention.ms"] == 5  # LONG
    assert types["segment.bytes"] == 3  # INT
    assert types["cleanup.policy"] == 7  # LIST
    assert types["min.cleanable.dirty.ratio"] == 6  # DOUBLE
    assert types["compression.type"] == 2  # STRING
    assert 0 not in types.values()
