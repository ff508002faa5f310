"""ListOffsets and DeleteRecords.

ListOffsets answers, per partition, by the requested timestamp:

======  ==============================================================================
 -2     earliest: the log start offset
 -1     latest: the log end offset (the next offset to be written)
 -3     max timestamp: the first record carrying the log's largest timestamp
 -4     earliest local (KIP-405): the log start offset, as every record is local here
 -5     latest tiered (KIP-1005): nothing is tiered, so offset -1 without a leader epoch
        (Kafka's answer when remote storage is off)
 T ≥ 0  the first record (in offset order) with timestamp ≥ T, through the time index;
        offset -1, timestamp -1 and leader epoch -1 when no record is that recent
        (Kafka's answer)
======  ==============================================================================

With ``isolation_level=1`` (read_committed, v2+) nothing at or above the partition's last
stable offset is answered: latest is the last stable offset, and a lookup that lands at
or beyond it finds nothing (Kafka's ``fetchOffsetForTimestamp`` with the LSO as bound).

DeleteRecords moves a partition's log start offset forward (``-1`` = to the high
watermark) and deletes the segments wholly below it.

OffsetForLeaderEpoch (23) tells a follower (or a KIP-320 consumer) where a leader epoch
ended in this log: the largest epoch ≤ the one asked and the offset where the next one
begins, from the epochs stamped in the batch headers (:mod:`logtrove.storage.epochs`,
walked in a thread). A ``current_leader_epoch`` other than the partition's is fenced as
Kafka fences it (older: FENCED_LEADER_EPOCH; newer: UNKNOWN_LEADER_EPOCH). A followed
partition answers from its copy of the leader's epochs.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import Operation, ResourceType
from logtrove.broker.access import Check, names_of, per_resource
from logtrove.broker.context import serves
from logtrove.broker.errors import error_code
from logtrove.storage import PartitionLog, StorageError
from logtrove.storage.epochs import end_offset_for, epoch_entries
from logtrove.wire import ApiKey

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


def _lookup(log: PartitionLog, timestamp: int, stable: int | None) -> tuple[int, int]:
    """(offset, timestamp) for one ListOffsets query; ``stable`` is the last stable offset
    of a read_committed query. Offset -1 means nothing was found."""
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, -1
    if timestamp == LATEST:
        return (log.log_end_offset if stable is None else stable), -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    found = log.max_timestamp_offset() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
    if found is None or (stable is not None and found.offset >= stable):
        return -1, -1
    return found.offset, found.timestamp


@serves(
    ApiKey.LIST_OFFSETS,
    1,
    9,
    access=per_resource(Check(ResourceType.TOPIC, Operation.DESCRIBE, names_of("topics", "name"))),
)
async def handle_list_offsets(broker: BrokerContext, request: Request) -> Reply:
    committed = getattr(request.body, "isolation_level", 0) == READ_COMMITTED
    topics = []
    for topic in request.body.topics:
        partitions = []
        denied = not broker.allowed(request, Operation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            result: dict[str, Any] = {"partition_index": p.partition_index, "timestamp": -1, "offset": -1}
            if denied:
                result["error_code"] = ErrorCode.topic_authorization_failed
                partitions.append(result)
                continue
            try:
                log = broker.storage.log(topic.name, p.partition_index)
                stable = None
                if committed:
                    stable = (await broker.txn.indexes.load(log)).last_stable_offset(log.log_end_offset)
                offset, timestamp = _lookup(log, p.timestamp, stable)
                epoch = log.leader_epoch if offset >= 0 else -1
                result.update(offset=offset, timestamp=timestamp, leader_epoch=epoch)
            except StorageError as exc:
                result["error_code"] = error_code(exc)
            partitions.append(result)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"topics": topics}


@serves(
    ApiKey.DELETE_RECORDS,
    0,
    2,
    access=per_resource(Check(ResourceType.TOPIC, Operation.DELETE, names_of("topics", "name"))),
)
async def handle_delete_records(broker: BrokerContext, request: Request) -> Reply:
    topics = []
    for topic in request.body.topics:
        partitions = []
        denied = not broker.allowed(request, Operation.DELETE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            result: dict[str, Any] = {"partition_index": p.partition_index, "low_watermark": -1}
            if denied:
                result["error_code"] = ErrorCode.topic_authorization_failed
                partitions.append(result)
                continue
            try:
                log = broker.storage.log(topic.name, p.partition_index)
                target = log.log_end_offset if p.offset == -1 else p.offset
                result["low_watermark"] = broker.storage.truncate_before(
                    topic.name, p.partition_index, target
                )
            except StorageError as exc:
                result["error_code"] = error_code(exc)
            partitions.append(result)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"topics": topics}


@serves(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    2,
    4,
    access=per_resource(Check(ResourceType.TOPIC, Operation.DESCRIBE, names_of("topics", "topic"))),
)
async def handle_offset_for_leader_epoch(broker: BrokerContext, request: Request) -> Reply:
    topics = []
    for topic in request.body.topics:
        partitions = []
        denied = not broker.allowed(request, Operation.DESCRIBE, ResourceType.TOPIC, topic.topic)
        for p in topic.partitions:
            result: dict[str, Any] = {"partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            current = getattr(p, "current_leader_epoch", -1)
            try:
                if denied:
                    result["error_code"] = ErrorCode.topic_authorization_failed
                    continue
                log = broker.storage.log(topic.topic, p.partition)
                ours = None if log.follower else log.leader_epoch
                if current >= 0 and ours is not None and current != ours:
                    older = current < ours
                    result["error_code"] = (
                        ErrorCode.fenced_leader_epoch if older else ErrorCode.unknown_leader_epoch
                    )
                    continue
                entries = await asyncio.to_thread(epoch_entries, log)
                epoch, end = end_offset_for(entries, p.leader_epoch, log.log_end_offset, ours)
                result.update(leader_epoch=epoch, end_offset=end)
            except StorageError as exc:
                result["error_code"] = error_code(exc)
            finally:
                partitions.append(result)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"topics": topics}
