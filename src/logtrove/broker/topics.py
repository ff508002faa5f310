"""Metadata, CreateTopics, DeleteTopics and CreatePartitions.

logtrove is a single broker: it is the leader and only replica of every partition
(leader epoch 0), and the controller. Metadata creates unknown topics when the client
allows it and the broker's ``auto_create_topics`` is on (Kafka's
``auto.create.topics.enable``), with ``default_partitions`` partitions.

Every creation (CreateTopics, CreatePartitions, auto-creation) runs in a worker thread:
a topic of thousands of partitions is seconds of file work, during which the event
loop keeps serving the other connections. Past the broker's total partition cap the
answer is POLICY_VIOLATION; out of file descriptors, KAFKA_STORAGE_ERROR with advice.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import CLUSTER_NAME, Operation
from logtrove.broker.access import Check, names_of, per_resource
from logtrove.broker.authorize import Resource, authorized_operations
from logtrove.broker.context import serves
from logtrove.broker.errors import error_code
from logtrove.storage import (
    StorageError,
    TopicConfig,
    TopicExistsError,
    TopicInfo,
    UnknownTopicError,
    check_topic_name,
)
from logtrove.wire import ZERO_UUID, ApiKey

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request


def _partitions(broker: BrokerContext, info: TopicInfo) -> list[dict[str, Any]]:
    node = broker.node_id
    return [
        {
            "error_code": 0,
            "partition_index": p,
            "leader_id": node,
            "leader_epoch": info.leader_epoch,
            "replica_nodes": [node],
            "isr_nodes": [node],
            "offline_replicas": [],
        }
        for p in range(info.partitions)
    ]


def _topic(
    broker: BrokerContext, request: Request, info: TopicInfo, with_operations: bool = False
) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": _partitions(broker, info),
        "topic_authorized_operations": authorized_operations(
            broker, request, Resource.TOPIC, info.name, with_operations
        ),
    }


async def auto_create(broker: BrokerContext, name: str) -> TopicInfo:
    """Create ``name`` with the broker's default partition count, off the event loop
    (races are harmless: the second creator waits for the first and gets its topic)."""
    if broker.storage.has_topic(name):
        return broker.storage.topic(name)
    try:
        return await asyncio.to_thread(broker.storage.create_topic, name, broker.config.default_partitions)
    except TopicExistsError:
        return broker.storage.topic(name)


def _failed(result: dict[str, Any], exc: Exception) -> None:
    """Fill a CreateTopics/CreatePartitions result with the error of ``exc``."""
    if isinstance(exc, StorageError):
        result["error_code"] = error_code(exc)
        result["error_message"] = str(exc)
    else:  # OSError: disk full, I/O error
        result["error_code"] = ErrorCode.kafka_storage_error
        result["error_message"] = f"cannot create the partition files: {exc}"


@serves(
    ApiKey.METADATA,
    0,
    12,
    access=per_resource(
        Check(Resource.TOPIC, Operation.DESCRIBE, names_of("topics", "name")),
        Check(Resource.CLUSTER, Operation.CREATE),  # auto-creation: on the cluster or the topic
        Check(Resource.TOPIC, Operation.CREATE),
    ),
)
async def handle_metadata(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    storage = broker.storage
    allow_create = broker.config.auto_create_topics and (
        request.version < 4 or getattr(body, "allow_auto_topic_creation", True)
    )
    topics: list[dict[str, Any]] = []
    ops = bool(getattr(body, "include_topic_authorized_operations", False))
    if body.topics is None or (request.version == 0 and not body.topics):
        topics = [  # the topics the principal may describe (Kafka leaves the others out)
            _topic(broker, request, info, ops)
            for info in storage.topics()
            if broker.allowed(request, Operation.DESCRIBE, Resource.TOPIC, info.name, audited=False)
        ]
    else:
        by_id: dict[Any, TopicInfo] | None = None
        for wanted in body.topics:
            name = wanted.name
            if name is None:  # v10+: by topic ID (how KIP-848 consumers resolve assignments)
                if by_id is None:
                    by_id = {info.topic_id: info for info in storage.topics()}
                topic_id = getattr(wanted, "topic_id", ZERO_UUID)
                found = by_id.get(topic_id)
                if found is None:
                    topics.append(_unknown(None, topic_id, ErrorCode.unknown_topic_id))
                elif not broker.allowed(request, Operation.DESCRIBE, Resource.TOPIC, found.name):
                    topics.append(_unknown(None, topic_id, ErrorCode.topic_authorization_failed))
                else:
                    topics.append(_topic(broker, request, found, ops))
                continue
            if not broker.allowed(request, Operation.DESCRIBE, Resource.TOPIC, name):
                topics.append(_unknown(name, ZERO_UUID, ErrorCode.topic_authorization_failed))
                continue
            try:
                may_create = allow_create and _may_create(broker, request, name)
                if allow_create and not may_create and not storage.has_topic(name):
                    topics.append(_unknown(name, ZERO_UUID, ErrorCode.topic_authorization_failed))
                    continue
                info = storage.topic(name) if not may_create else await auto_create(broker, name)
                topics.append(_topic(broker, request, info, ops))
            except UnknownTopicError:
                topics.append(_unknown(name, ZERO_UUID, ErrorCode.unknown_topic_or_partition))
            except StorageError as exc:
                topics.append(_unknown(name, ZERO_UUID, error_code(exc)))
            except OSError:
                topics.append(_unknown(name, ZERO_UUID, ErrorCode.kafka_storage_error))
    host, port = broker.endpoint(request.session.listener)
    return {
        "brokers": [{"node_id": broker.node_id, "host": host, "port": port, "rack": None}],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
        "cluster_authorized_operations": authorized_operations(
            broker,
            request,
            Resource.CLUSTER,
            asked=getattr(body, "include_cluster_authorized_operations", False),
        ),
    }


def _may_create(broker: BrokerContext, request: Request, name: str) -> bool:
    """CREATE on the cluster or on the topic (Kafka's rule for creating a topic)."""
    return broker.allowed(
        request, Operation.CREATE, Resource.CLUSTER, CLUSTER_NAME, audited=False
    ) or broker.allowed(request, Operation.CREATE, Resource.TOPIC, name)


def _unknown(name: str | None, topic_id: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "partitions": []}


@serves(
    ApiKey.CREATE_TOPICS,
    2,
    7,
    access=per_resource(
        Check(Resource.CLUSTER, Operation.CREATE),  # on the cluster or the topic
        Check(Resource.TOPIC, Operation.CREATE),
    ),
)
async def handle_create_topics(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    results = []
    for topic in body.topics:
        result: dict[str, Any] = {"name": topic.name, "num_partitions": -1, "replication_factor": -1}
        partitions = topic.num_partitions if topic.num_partitions > 0 else broker.config.default_partitions
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        try:
            if not _may_create(broker, request, topic.name):
                result["error_code"] = ErrorCode.topic_authorization_failed
                result["error_message"] = "CREATE on the cluster or on this topic is needed"
            elif topic.assignments and (topic.num_partitions != -1 or topic.replication_factor != -1):
                result["error_code"] = ErrorCode.invalid_request
                result["error_message"] = (
                    "both num_partitions or replication_factor and a replica assignment were given; give one"
                )
            elif topic.num_partitions == 0 or topic.num_partitions < -1:
                result["error_code"] = ErrorCode.invalid_partitions
                result["error_message"] = "the number of partitions must be positive, or -1 for the default"
            elif topic.replication_factor == 0 or topic.replication_factor < -1:
                result["error_code"] = ErrorCode.invalid_replication_factor
                result["error_message"] = "the replication factor must be 1, or -1 for the default"
            elif topic.replication_factor > 1:
                result["error_code"] = ErrorCode.invalid_replication_factor
                result["error_message"] = "logtrove is a single broker: replication factor must be 1 or -1"
            elif topic.assignments and (
                wrong := _wrong_assignment(
                    broker,
                    [list(a.broker_ids) for a in topic.assignments],
                    [a.partition_index for a in topic.assignments],
                )
            ):
                result["error_code"] = ErrorCode.invalid_replica_assignment
                result["error_message"] = wrong
            elif body.validate_only:
                check_topic_name(topic.name)
                TopicConfig.from_overrides(configs)
                if broker.storage.has_topic(topic.name):
                    result["error_code"] = ErrorCode.topic_already_exists
            else:
                partitions = len(topic.assignments) or partitions
                info = await asyncio.to_thread(broker.storage.create_topic, topic.name, partitions, configs)
                result.update(
                    topic_id=info.topic_id,
                    num_partitions=info.partitions,
                    replication_factor=1,
                    configs=[
                        {"name": k, "value": v, "read_only": False, "config_source": 5, "is_sensitive": False}
                        for k, v in info.config.as_strings().items()
                    ],
                )
        except (StorageError, OSError) as exc:
            _failed(result, exc)
        results.append(result)
    return {"topics": results}


@serves(
    ApiKey.DELETE_TOPICS,
    1,
    6,
    access=per_resource(
        Check(Resource.TOPIC, Operation.DELETE, names_of("topic_names")),
        Check(Resource.TOPIC, Operation.DESCRIBE),  # a topic named by ID
    ),
)
async def handle_delete_topics(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    if request.version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    by_id = {info.topic_id: info.name for info in broker.storage.topics()}
    responses = []
    for given, topic_id in wanted:
        by_topic_id = given is None and topic_id is not None
        name = by_id.get(topic_id) if by_topic_id else given
        result: dict[str, Any] = {"name": name, "topic_id": topic_id or ZERO_UUID}
        try:
            if name is None:
                result["error_code"] = ErrorCode.unknown_topic_id
            elif by_topic_id and not broker.allowed(request, Operation.DESCRIBE, Resource.TOPIC, name):
                # named by ID: its name is not told to one who may not describe it (Kafka)
                result.update(name=None, error_code=ErrorCode.topic_authorization_failed)
            elif not broker.allowed(request, Operation.DELETE, Resource.TOPIC, name):
                result["error_code"] = ErrorCode.topic_authorization_failed
            else:
                # in a thread: removing a big topic's files must not stall the listener
                result["topic_id"] = await asyncio.to_thread(broker.storage.delete_topic, name) or ZERO_UUID
                broker.offsets.delete(broker.offsets.for_topic(name))  # tombstones for its commits
        except StorageError as exc:
            result["error_code"] = error_code(exc)
            result["error_message"] = str(exc)
        responses.append(result)
    return {"responses": responses}


@serves(
    ApiKey.CREATE_PARTITIONS,
    0,
    3,
    access=per_resource(Check(Resource.TOPIC, Operation.ALTER, names_of("topics", "name"))),
)
async def handle_create_partitions(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    results = []
    for topic in body.topics:
        result: dict[str, Any] = {"name": topic.name}
        if not broker.allowed(request, Operation.ALTER, Resource.TOPIC, topic.name):
            result["error_code"] = ErrorCode.topic_authorization_failed
            results.append(result)
            continue
        try:
            current = broker.storage.topic(topic.name).partitions
            wrong = None
            if topic.assignments:
                wrong = _wrong_assignment(broker, [list(a.broker_ids) for a in topic.assignments])
                if wrong is None and len(topic.assignments) != topic.count - current:
                    wrong = (
                        f"{len(topic.assignments)} assignments for {topic.count - current} new partitions "
                        f"({current} to {topic.count}); give one per new partition"
                    )
            if wrong is not None:
                result["error_code"] = ErrorCode.invalid_replica_assignment
                result["error_message"] = wrong
            elif body.validate_only:
                broker.storage.check_client_change(topic.name, partitions=True)
                if topic.count <= current:
                    result["error_code"] = ErrorCode.invalid_partitions
                    result["error_message"] = f"topic has {current} partitions; the new count must be larger"
            else:
                await asyncio.to_thread(broker.storage.create_partitions, topic.name, topic.count)
        except (StorageError, OSError) as exc:
            _failed(result, exc)
            if result["error_code"] == ErrorCode.invalid_topic_exception:
                result["error_code"] = ErrorCode.invalid_partitions
        results.append(result)
    return {"results": results}


def _wrong_assignment(
    broker: BrokerContext, replicas: list[list[int]], indexes: list[int] | None = None
) -> str | None:
    """Why a manual replica assignment cannot be served, or None: this broker is the
    only one, so each partition's replica list must be exactly ``[its node id]``, and the
    partition indexes (CreateTopics) must be 0..n-1, as Kafka requires."""
    if indexes is not None and sorted(indexes) != list(range(len(indexes))):
        return f"the assignment's partition indexes {sorted(indexes)} are not 0-{len(indexes) - 1}"
    for i, ids in enumerate(replicas):
        if ids != [broker.node_id]:
            return (
                f"partition {indexes[i] if indexes else i} is assigned to brokers {ids}; "
                f"logtrove is a single broker: assign each partition to [{broker.node_id}]"
            )
    return None
