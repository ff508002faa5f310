"""Fetch: long polls, and record bytes sent exactly as they lie in the segment files.

The response is encoded by hand (:mod:`logtrove.wire.fetch`), with the record bytes
sent as they lie in the segment files: never copied into a larger buffer or re-encoded.
Fetch sessions (KIP-227) are not kept: every answer carries ``session_id`` 0, which
tells clients to send full fetch requests.

A partition named more than once is read once (merged as Kafka merges it), and the
record bytes of one response stay within ``max_bytes`` and the broker's
``fetch_max_bytes`` except for the first partition's first batch (see :func:`_read_all`),
so a request of a few bytes can never make the broker read more than that budget.

Long poll: when fewer than ``min_bytes`` are available and no partition has an error,
the request waits for the next append (any partition) until ``max_wait_ms`` is over, then
reads again.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from logtrove.acl import Operation, ResourceType
from logtrove.broker.access import Check, names_of, per_resource
from logtrove.broker.context import serves
from logtrove.broker.requests import RawBody
from logtrove.storage import (
    OffsetOutOfRangeError,
    PartitionLog,
    ReadResult,
    StorageError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logtrove.wire import ApiKey, FetchedPartition, encode_fetch_response, ms

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Request

READ_COMMITTED = 1


@dataclass(frozen=True)
class _Wanted:
    """One distinct partition of a Fetch request, with the values of its last mention."""

    index: int
    fetch_offset: int
    partition_max_bytes: int


def wanted_partitions(request: Request) -> list[tuple[str | uuid.UUID, list[_Wanted]]]:
    """The request's partitions with duplicates merged as Kafka merges them: a partition
    named twice is read once, at the place of its first mention, with the offset and
    size of its last one (Kafka keys ``fetchData`` by topic-partition in a
    ``LinkedHashMap``). Consecutive partitions of one topic (by name before v13, by ID
    from v13) form one topic entry of the response, as in Kafka's ``FetchResponse.of``."""
    merged: dict[tuple[str | uuid.UUID, int], _Wanted] = {}
    for topic in request.body.topics:
        key: str | uuid.UUID = topic.topic_id if request.version >= 13 else topic.topic
        for p in topic.partitions:
            merged[(key, p.partition)] = _Wanted(p.partition, p.fetch_offset, p.partition_max_bytes)
    grouped: list[tuple[str | uuid.UUID, list[_Wanted]]] = []
    for (key, _), wanted in merged.items():
        if not grouped or grouped[-1][0] != key:
            grouped.append((key, []))
        grouped[-1][1].append(wanted)
    return grouped


def response_budget(broker: BrokerContext, request: Request) -> int:
    """Record bytes one response may carry: the request's ``max_bytes`` (v3+), never
    more than the broker's ``fetch_max_bytes`` (Kafka's broker ``fetch.max.bytes``) nor
    what is left of ``fetch_memory_bytes`` after the replies clients have not yet taken
    (at or below zero, the response still gets its first batch; see :func:`_read_all`)."""
    config = broker.config
    left = config.fetch_memory_bytes - broker.unsent_bytes
    return min(int(request.body.max_bytes), config.fetch_max_bytes, left)


def _read_all(
    broker: BrokerContext, request: Request, names: dict[uuid.UUID, str]
) -> tuple[list[tuple[str, uuid.UUID, list[FetchedPartition]]], int, bool]:
    """Read every requested partition once: (results, total bytes, any error).

    Sizes follow Kafka's ReplicaManager: each partition gives whole batches up to
    ``min(partition_max_bytes, what is left of the response budget)``; only the first
    partition that has data may exceed that with its one first batch (so a consumer
    always progresses past a batch larger than its limits). A later partition whose
    first batch does not fit gives no records this time, only its offsets.
    """
    budget = response_budget(broker, request)
    committed = getattr(request.body, "isolation_level", 0) == READ_COMMITTED
    total = 0
    errors = False
    out = []
    storage = broker.storage
    for key, wanted in wanted_partitions(request):
        if isinstance(key, uuid.UUID):
            topic_id, name = key, names.get(key, "")
        else:
            name = key
            topic_id = storage.topic(name).topic_id if storage.has_topic(name) else uuid.UUID(int=0)
        parts = []
        readable = not name or broker.allowed(request, Operation.READ, ResourceType.TOPIC, name)
        for p in wanted:
            result = FetchedPartition(p.index, 0, -1, -1, None)
            try:
                if not name:
                    result.error = ErrorCode.unknown_topic_id
                    raise LookupError
                if not readable:
                    result.error = ErrorCode.topic_authorization_failed
                    raise LookupError
                log = storage.log(name, p.index)
                limit = min(p.partition_max_bytes, budget - total)
                if committed:
                    read = _read_committed(broker, log, p.fetch_offset, max(limit, 1), result)
                else:
                    txns = broker.txn.indexes.peek(log)
                    read = log.read(p.fetch_offset, max(limit, 1))
                    if txns is not None:
                        result.last_stable = txns.last_stable_offset(read.log_end_offset)
                result.high_watermark, result.log_start = read.log_end_offset, read.log_start_offset
                if read.slice is not None and (total == 0 or read.size <= limit):
                    result.records = read.data()
                    total += read.size
            except LookupError:
                errors = True
            except OffsetOutOfRangeError as exc:
                result.error = ErrorCode.offset_out_of_range
                result.high_watermark, result.log_start = exc.log_end_offset, exc.log_start_offset
                errors = True
            except (UnknownTopicError, UnknownPartitionError):
                result.error = ErrorCode.unknown_topic_or_partition
                errors = True
            except StorageError:
                result.error = ErrorCode.kafka_storage_error
                errors = True
            parts.append(result)
        out.append((name, topic_id, parts))
    return out, total, errors


def _read_committed(
    broker: BrokerContext, log: PartitionLog, offset: int, max_bytes: int, result: FetchedPartition
) -> ReadResult:
    """A read_committed read: batches below the last stable offset only, and the aborted
    transactions with data in the range read (as Kafka bounds them: by the offset after the
    batches returned, so a response never lists the aborted transactions of the rest of
    the log)."""
    txns = broker.txn.indexes.get(log)
    end = log.log_end_offset
    stable = txns.last_stable_offset(end)
    read = log.read(offset, max_bytes, max_offset=stable)
    result.last_stable = stable
    broker.txn.indexes.after_cleaning(log, txns)
    txns.forget_before(read.log_start_offset)
    upper = stable if read.upper_offset is None else read.upper_offset
    result.aborted = (
        broker.txn.indexes.aborted_between(log, txns, offset, upper) if read.slice is not None else []
    )
    return read


async def _load_transactions(broker: BrokerContext, request: Request, names: dict[uuid.UUID, str]) -> None:
    """Build, off the event loop, the transaction state of the partitions a read_committed
    Fetch names (once per partition after a start; see TxnIndexes.load)."""
    for key, wanted in wanted_partitions(request):
        name = names.get(key, "") if isinstance(key, uuid.UUID) else key
        for p in wanted:
            try:
                log = broker.storage.log(name, p.index)
            except StorageError:
                continue  # answered with its error by _read_all
            await broker.txn.indexes.load(log)


@serves(
    ApiKey.FETCH,
    4,
    16,
    access=per_resource(Check(ResourceType.TOPIC, Operation.READ, names_of("topics", "topic"))),
)
async def handle_fetch(broker: BrokerContext, request: Request) -> RawBody:

    body = request.body
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ms(body.max_wait) / 1000
    names = {info.topic_id: info.name for info in broker.storage.topics()} if request.version >= 13 else {}
    if getattr(body, "isolation_level", 0) == READ_COMMITTED:
        await _load_transactions(broker, request, names)
    while True:
        topics, total, errors = _read_all(broker, request, names)
        remaining = deadline - loop.time()
        if total >= body.min_bytes or errors or remaining <= 0:
            break
        await broker.wait_for_append(remaining)
    return RawBody(encode_fetch_response(request.version, request.flexible, topics))
