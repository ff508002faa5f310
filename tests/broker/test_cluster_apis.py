"""Cluster admin APIs answered for one broker (issue 14): DescribeCluster (60),
DescribeLogDirs (35), DescribeProducers (61), ElectLeaders (43), Alter/List partition
reassignments (45/46), and the authorized-operations fields (finding 6: they stayed empty
when asked for). Real admin clients where they expose the API, raw requests otherwise."""

from __future__ import annotations

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode

from logtrove.testing import BrokerProcess, WireClient
from logtrove.wire import ApiKey

TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _topic(admin: AdminClient, name: str, partitions: int = 2) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def test_describe_cluster_names_this_broker_with_its_operations(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    (node,) = cluster.nodes
    assert (node.host, node.port) == ("127.0.0.1", shared_broker.port)
    assert cluster.controller.id == node.id
    assert cluster.cluster_id == admin.list_topics(timeout=10).cluster_id
    ops = {op.name for op in cluster.authorized_operations}
    assert {"DESCRIBE", "ALTER", "CREATE", "IDEMPOTENT_WRITE", "CLUSTER_ACTION"} <= ops
    assert "READ" not in ops  # not a cluster operation


def test_topics_and_groups_carry_authorized_operations_when_asked(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    _topic(admin, "ops-topic")
    (described,) = admin.describe_topics(
        TopicCollection(["ops-topic"]), include_authorized_operations=True
    ).values()
    assert {op.name for op in described.result(10).authorized_operations} == TOPIC_OPS

    consumer_group = "ops-group"
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(consumer_group, [TopicPartition("ops-topic", 0, 1)])]
    )[consumer_group].result(10)
    (group,) = admin.describe_consumer_groups([consumer_group], include_authorized_operations=True).values()
    assert {op.name for op in group.result(10).authorized_operations} == {"READ", "DESCRIBE", "DELETE"}
    assert AclOperation.READ in group.result(10).authorized_operations


def test_describe_log_dirs_reports_the_data_dir_and_partition_sizes(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    _topic(admin, "logdirs", 2)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    for i in range(50):
        producer.produce("logdirs", value=b"x" * 100, partition=i % 2)
    assert producer.flush(10) == 0

    kp = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    try:
        answer = kp.describe_log_dirs()
    finally:
        kp.close()
    ((broker_dirs,),) = [entry["log_dirs"] for entry in answer]  # one broker, one log dir
    assert broker_dirs["error_code"] == 0
    assert broker_dirs["log_dir"] == str((shared_broker.data).resolve())
    assert 0 < broker_dirs["usable_bytes"] <= broker_dirs["total_bytes"]
    topics = {t["name"]: t for t in broker_dirs["topics"]}
    sizes = {p["partition_index"]: p["partition_size"] for p in topics["logdirs"]["partitions"]}
    assert set(sizes) == {0, 1} and all(size > 25 * 100 for size in sizes.values())


def test_describe_producers_lists_an_idempotent_producer(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    _topic(admin, "producers", 1)
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "enable.idempotence": True})
    for _ in range(3):
        producer.produce("producers", value=b"v")
        producer.flush(10)
    with WireClient(shared_broker.port) as client:
        resp = client.request(
            ApiKey.DESCRIBE_PRODUCERS,
            0,
            {
                "topics": [
                    {"name": "producers", "partition_indexes": [0, 9]},
                    {"name": "nope", "partition_indexes": [0]},
                ]
            },
        )
    by = {(t.name, int(p.partition_index)): p for t in resp.topics for p in t.partitions}
    (active,) = by[("producers", 0)].active_producers
    assert active.producer_id >= 0 and active.last_sequence == 2
    assert by[("producers", 9)].error_code == ErrorCode.unknown_topic_or_partition
    assert by[("nope", 0)].error_code == ErrorCode.unknown_topic_or_partition


def test_elect_leaders_answers_election_not_needed(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    _topic(admin, "elect", 2)
    results = admin.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition("elect", 0), TopicPartition("elect", 5)]
    ).result(10)
    codes = {tp.partition: err.code() for tp, err in results.items() if err is not None}
    assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 5: KafkaError.UNKNOWN_TOPIC_OR_PART}


def test_reassignments_accept_only_this_broker_and_none_are_in_progress(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    _topic(admin, "reassign", 1)
    me = admin.describe_cluster().result(10).nodes[0].id
    with WireClient(shared_broker.port) as client:
        resp = client.request(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            {
                "timeout": 5000,
                "topics": [
                    {
                        "name": "reassign",
                        "partitions": [
                            {"partition_index": 0, "replicas": [me]},
                            {"partition_index": 0, "replicas": [me, me + 1]},
                            {"partition_index": 0, "replicas": None},
                            {"partition_index": 3, "replicas": [me]},
                        ],
                    }
                ],
            },
        )
        codes = [int(p.error_code) for t in resp.responses for p in t.partitions]
        assert codes == [
            ErrorCode.none,
            ErrorCode.invalid_replica_assignment,
            ErrorCode.no_reassignment_in_progress,
            ErrorCode.unknown_topic_or_partition,
        ]
        listed = client.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 5000, "topics": None})
        assert listed.error_code == 0 and list(listed.topics) == []
