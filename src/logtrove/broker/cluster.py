"""Cluster APIs answered for one broker: DescribeCluster (60), DescribeLogDirs (35),
DescribeProducers (61), ElectLeaders (43), AlterPartitionReassignments (45) and
ListPartitionReassignments (46).

Admin clients and UIs call these against any Kafka cluster; logtrove is a cluster of one
broker that leads every partition and never replicates (see docs/KAFKA_APIS.md), so the
answers are what Kafka gives for such a cluster: this broker is the controller, every
leader is already the preferred one (ELECTION_NOT_NEEDED), no reassignment is ever in
progress, and the only assignment that can be served names this broker alone.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import Operation
from logtrove.broker.access import Check, names_of, on_cluster, per_resource
from logtrove.broker.authorize import Resource, authorized_operations
from logtrove.broker.context import serves
from logtrove.broker.errors import error_code
from logtrove.storage import StorageError
from logtrove.wire import ApiKey

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request


def _partitions_of(broker: BrokerContext) -> dict[str, int]:
    return {info.name: info.partitions for info in broker.storage.topics()}


def _known(partitions: dict[str, int], topic: str, partition: int) -> bool:
    return 0 <= partition < partitions.get(topic, 0)


def _refused_cluster(request: Any, code: int, message: str) -> Mapping[str, Any]:
    return {"error_code": code, "error_message": message, "controller_id": -1, "brokers": []}


@serves(ApiKey.DESCRIBE_CLUSTER, 0, 2, access=on_cluster(Operation.DESCRIBE, refused=_refused_cluster))
async def handle_describe_cluster(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    if getattr(body, "endpoint_type", 1) != 1:  # 2: controllers, which KRaft clients ask separately
        return {
            "error_code": ErrorCode.unsupported_endpoint_type,
            "error_message": "logtrove has no separate controller endpoints: ask for brokers (endpoint type 1)",
            "cluster_id": broker.cluster_id,
            "controller_id": -1,
            "brokers": [],
            "cluster_authorized_operations": authorized_operations(
                broker, request, Resource.CLUSTER, asked=False
            ),
        }
    host, port = broker.endpoint(request.session.listener)
    return {
        "error_code": ErrorCode.none,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": [{"broker_id": broker.node_id, "host": host, "port": port, "rack": None}],
        "cluster_authorized_operations": authorized_operations(
            broker, request, Resource.CLUSTER, asked=body.include_cluster_authorized_operations
        ),
    }


@serves(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, access=on_cluster(Operation.DESCRIBE))
async def handle_describe_log_dirs(broker: BrokerContext, request: Request) -> Reply:
    """The one log directory (the data directory): bytes per partition on disk, offset
    lag 0 (no future replicas), and the file system's total and usable bytes. Sizes are
    summed in a thread (a directory of many partitions stats many segments)."""
    body = request.body
    partitions = _partitions_of(broker)
    if body.topics is None:
        wanted = [(t, p) for t, n in sorted(partitions.items()) for p in range(n)]
    else:
        wanted = [(t.topic, p) for t in body.topics for p in t.partitions if _known(partitions, t.topic, p)]

    def sizes() -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for topic, p in wanted:
            try:
                size = broker.storage.log(topic, p).size_bytes
            except (StorageError, FileNotFoundError):  # deleted meanwhile: left out, as Kafka would
                continue
            out.setdefault(topic, []).append(
                {"partition_index": p, "partition_size": size, "offset_lag": 0, "is_future_key": False}
            )
        return out

    by_topic = await asyncio.to_thread(sizes)
    stat = os.statvfs(broker.storage.path)
    return {
        "error_code": ErrorCode.none,
        "results": [
            {
                "error_code": ErrorCode.none,
                "log_dir": str(broker.storage.path.resolve()),
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                "total_bytes": stat.f_blocks * stat.f_frsize,
                "usable_bytes": stat.f_bavail * stat.f_frsize,
            }
        ],
    }


@serves(
    ApiKey.DESCRIBE_PRODUCERS,
    0,
    0,
    access=per_resource(Check(Resource.TOPIC, Operation.READ, names_of("topics", "name"))),
)
async def handle_describe_producers(broker: BrokerContext, request: Request) -> Reply:
    """The idempotent producers the broker remembers per partition (see
    :class:`~logtrove.broker.producer_state.ProducerStates`): ID, epoch and last sequence, and
    the first offset of the producer's open transaction in the partition (-1 if none; what
    ``kafka-transactions.sh find-hanging`` looks at). The last timestamp is not kept (-1);
    the coordinator epoch is 0 for a producer with an open transaction (one coordinator
    that never moves), else -1."""
    partitions = _partitions_of(broker)
    topics = []
    for topic in request.body.topics:
        results = []
        readable = broker.allowed(request, Operation.READ, Resource.TOPIC, topic.name)
        for p in topic.partition_indexes:
            if not readable:
                results.append({"partition_index": p, "error_code": ErrorCode.topic_authorization_failed})
                continue
            if not _known(partitions, topic.name, p):
                results.append({"partition_index": p, "error_code": ErrorCode.unknown_topic_or_partition})
                continue
            try:
                open_txns = (await broker.txn.indexes.load(broker.storage.log(topic.name, p))).open
            except StorageError as exc:  # a partition that cannot be opened
                results.append({"partition_index": p, "error_code": error_code(exc)})
                continue
            active = [
                {
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "last_sequence": last_seq,
                    "last_timestamp": -1,
                    "coordinator_epoch": 0 if pid in open_txns else -1,
                    "current_txn_start_offset": open_txns.get(pid, -1),
                }
                for pid, epoch, last_seq in broker.producers.active(topic.name, p)
            ]
            results.append({"partition_index": p, "error_code": ErrorCode.none, "active_producers": active})
        topics.append({"name": topic.name, "partitions": results})
    return {"topics": topics}


def _refused_elections(request: Any, code: int, message: str) -> Mapping[str, Any]:
    """Each partition asked answered with the error (v0 has no top-level error code)."""
    results = [
        {
            "topic": tps.topic,
            "partition_result": [
                {"partition_id": p, "error_code": code, "error_message": message} for p in tps.partitions
            ],
        }
        for tps in request.body.topic_partitions or ()
    ]
    return {"error_code": code, "replica_election_results": results}


@serves(ApiKey.ELECT_LEADERS, 0, 2, access=on_cluster(Operation.ALTER, refused=_refused_elections))
async def handle_elect_leaders(broker: BrokerContext, request: Request) -> Reply:
    """Every partition's leader is this broker, its only (preferred) replica: a named
    partition is ELECTION_NOT_NEEDED; asked for all partitions (null), Kafka lists none."""
    body = request.body
    partitions = _partitions_of(broker)
    results = []
    for tps in body.topic_partitions or ():
        answers = []
        for p in tps.partitions:
            if _known(partitions, tps.topic, p):
                code, message = (
                    ErrorCode.election_not_needed,
                    "this broker already leads it (its only replica)",
                )
            else:
                code, message = ErrorCode.unknown_topic_or_partition, "no such topic or partition"
            answers.append({"partition_id": p, "error_code": code, "error_message": message})
        results.append({"topic": tps.topic, "partition_result": answers})
    return {"error_code": ErrorCode.none, "replica_election_results": results}


@serves(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0, access=on_cluster(Operation.ALTER))
async def handle_alter_partition_reassignments(broker: BrokerContext, request: Request) -> Reply:
    """A target of exactly this broker is where the partition already is (done at
    once); cancelling (null replicas) finds nothing in progress; any other target names
    brokers that do not exist."""
    partitions = _partitions_of(broker)
    responses = []
    for topic in request.body.topics:
        answers = []
        for part in topic.partitions:
            code, message = ErrorCode.none, None
            if not _known(partitions, topic.name, part.partition_index):
                code, message = ErrorCode.unknown_topic_or_partition, "no such topic or partition"
            elif part.replicas is None:
                code, message = ErrorCode.no_reassignment_in_progress, "no reassignment is in progress"
            elif list(part.replicas) != [broker.node_id]:
                code = ErrorCode.invalid_replica_assignment
                message = (
                    f"replicas {list(part.replicas)}: logtrove is a single broker, "
                    f"the only assignment is [{broker.node_id}]"
                )
            answers.append(
                {"partition_index": part.partition_index, "error_code": code, "error_message": message}
            )
        responses.append({"name": topic.name, "partitions": answers})
    return {"error_code": ErrorCode.none, "responses": responses}


@serves(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, access=on_cluster(Operation.DESCRIBE))
async def handle_list_partition_reassignments(broker: BrokerContext, request: Request) -> Reply:
    """No reassignment is ever in progress on one broker."""
    return {"error_code": ErrorCode.none, "topics": []}
