"""The Apache Kafka fixtures are real Kafka: a topic created on them takes records from a
Python client and gives them back, on one node and across a three-node cluster (with
every replica in sync)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.testing import consume_until
from logtrove.testing.kafka import KafkaCluster


def _round_trip(cluster: KafkaCluster, topic: str, replicas: int) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=replicas)])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(20):
        producer.produce(topic, key=b"k%d" % (i % 4), value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        got = consume_until(consumer, 20, 60, what=f"records of {topic}")
    finally:
        consumer.close()
    assert sorted((m.partition(), m.offset(), m.value()) for m in got) == sorted(
        (i % 2, i // 2, b"v%d" % i) for i in range(20)
    )
    return admin


def test_a_single_kafka_broker_serves_a_topic(kafka_broker: KafkaCluster) -> None:
    admin = _round_trip(kafka_broker, "peer-one", replicas=1)
    assert set(admin.list_topics(timeout=10).brokers) == {1}


@pytest.mark.slow
def test_a_three_node_kafka_cluster_replicates_a_topic(kafka_cluster: KafkaCluster) -> None:
    admin = _round_trip(kafka_cluster, "peer-three", replicas=3)
    metadata = admin.list_topics("peer-three", timeout=10)
    assert set(metadata.brokers) == {1, 2, 3}
    for partition in metadata.topics["peer-three"].partitions.values():
        assert sorted(partition.replicas) == [1, 2, 3]
        assert sorted(partition.isrs) == [1, 2, 3]
