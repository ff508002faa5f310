"""Produce and InitProducerId.

A produced batch is validated and appended as-is by the storage layer (no per-record
work), unless its topic's ``compression.type`` names another codec: then it is
recompressed in a worker thread first (:func:`_recompress_off_loop`). An idempotent
producer's batches are checked against its recent ones first
(:class:`~logtrove.broker.producer_state.ProducerStates`: a retry is answered with its
original offsets, a gap in its sequence numbers is refused).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import Operation, ResourceType
from logtrove.broker.access import Check, names_of, per_resource
from logtrove.broker.context import serves
from logtrove.broker.errors import error_code
from logtrove.broker.producer_state import Appended
from logtrove.broker.requests import RawBody
from logtrove.broker.txn_api import init_transactional_producer
from logtrove.records import HEADER_SIZE, BatchHeader, RecordsError, read_header
from logtrove.records.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
from logtrove.storage import (
    AppendResult,
    InvalidRecordError,
    PartitionLog,
    StorageError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logtrove.storage.log import DeferredFlushes, defer_flushes
from logtrove.wire import ApiKey
from logtrove.wire.produce import PartitionProduceResult, encode_produce_response

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request


@serves(
    ApiKey.INIT_PRODUCER_ID,
    0,
    5,
    access=per_resource(
        Check(ResourceType.TRANSACTIONAL_ID, Operation.WRITE, names_of("transactional_id")),
        Check(ResourceType.CLUSTER, Operation.IDEMPOTENT_WRITE),
        Check(ResourceType.TOPIC, Operation.WRITE),  # on any topic (KIP-679)
    ),
)
async def handle_init_producer_id(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    if body.transactional_id is not None:
        if not broker.allowed(request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            return {
                "error_code": ErrorCode.transactional_id_authorization_failed,
                "producer_id": -1,
                "producer_epoch": -1,
            }
        return await init_transactional_producer(broker, request)
    if not _may_write_idempotently(broker, request):
        return {"error_code": ErrorCode.cluster_authorization_failed, "producer_id": -1, "producer_epoch": -1}
    states = broker.producers
    pid = getattr(body, "producer_id", -1)
    epoch = getattr(body, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < 32766:
        return {"producer_id": pid, "producer_epoch": epoch + 1}
    return {"producer_id": states.new_producer_id(), "producer_epoch": 0}


def _may_write_idempotently(broker: BrokerContext, request: Request) -> bool:
    """IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KIP-679)."""
    if request.guard.allows_any(Operation.WRITE, ResourceType.TOPIC):
        return True
    return broker.allowed_cluster(request, Operation.IDEMPOTENT_WRITE)  # with its audit line if denied


Records = bytes | bytearray | memoryview
_TID_DENIED = ErrorCode.transactional_id_authorization_failed


def _append(
    broker: BrokerContext, topic: str, partition: int, records: Records | Exception | None
) -> PartitionProduceResult:
    """Append one partition's records; ``records`` is an exception when their
    recompression (:func:`_recompress_off_loop`) refused them."""
    try:
        if isinstance(records, Exception):
            raise records
        if not records:
            raise RecordsError("no records in the produce request")
        log = broker.storage.log(topic, partition)
        header = read_header(records, 0) if len(records) >= HEADER_SIZE else None
        states = broker.producers if header is not None and header.producer_id >= 0 else None
        txns = None
        if header is not None and header.attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL):
            refused = _check_transactional(broker, header, topic, partition)
            if refused is not None:
                return refused
            txns = broker.txn.indexes.get(log)
        if states is not None and header is not None:
            verdict = states.check(
                log, header.producer_id, header.producer_epoch, header.base_sequence, header.record_count
            )
            if isinstance(verdict, Appended):
                return PartitionProduceResult(
                    partition, base_offset=verdict.base_offset, log_start_offset=log.log_start_offset
                )
            if verdict:
                return PartitionProduceResult(partition, error_code=verdict)
        appended = log.append(records)
        if txns is not None and header is not None:
            txns.on_transactional_batch(header.producer_id, appended.base_offset)
        if states is not None and header is not None:
            states.record(
                header.producer_id,
                header.producer_epoch,
                topic,
                partition,
                header.base_sequence,
                header.record_count,
                appended.base_offset,
            )
        broker.notify_append()
        return PartitionProduceResult(
            partition,
            base_offset=appended.base_offset,
            log_append_time=appended.log_append_time,
            log_start_offset=appended.log_start_offset,
        )
    except (UnknownTopicError, UnknownPartitionError):
        return PartitionProduceResult(partition, error_code=ErrorCode.unknown_topic_or_partition)
    except InvalidRecordError as exc:
        return PartitionProduceResult(
            partition, error_code=error_code(exc), error_message=str(exc), record_errors=exc.record_errors
        )
    except (StorageError, RecordsError) as exc:
        return PartitionProduceResult(partition, error_code=error_code(exc), error_message=str(exc))
    except OSError as exc:  # disk full, I/O error: the client may retry
        message = f"cannot write {topic}-{partition}: {exc}"
        return PartitionProduceResult(
            partition, error_code=ErrorCode.kafka_storage_error, error_message=message
        )


async def _load_transactions(broker: BrokerContext, body: Any, denied: set[str]) -> None:
    """Build, off the event loop, the transaction state of the partitions this request
    writes transactional batches to (once per partition after a start; see
    TxnIndexes.load), so that the appends never walk a log on the loop. Not of the
    ``denied`` topics: a refused write builds nothing."""
    for topic in body.topic_data:
        if topic.name in denied:
            continue
        for p in topic.partition_data:
            records = p.records
            if not records or len(records) < HEADER_SIZE or not read_header(records, 0).is_transactional:
                continue
            try:
                await broker.txn.indexes.load(broker.storage.log(topic.name, p.index))
            except StorageError:
                continue  # answered with its error by _append


def _check_transactional(
    broker: BrokerContext, header: BatchHeader, topic: str, partition: int
) -> PartitionProduceResult | None:
    """The refusal of a transactional or control batch, or ``None`` to append it. Only the
    coordinator writes control batches (markers); a transactional batch must come from
    its producer's current epoch, in an open transaction the partition was added to."""
    if header.is_control:
        message = "clients may not write control batches (transaction markers)"
        return PartitionProduceResult(partition, error_code=ErrorCode.invalid_record, error_message=message)
    code = broker.txn.check_produce(header.producer_id, header.producer_epoch, topic, partition)
    if code:
        message = (
            f"transactional batch of producer {header.producer_id} epoch {header.producer_epoch} refused"
        )
        return PartitionProduceResult(partition, error_code=code, error_message=message)
    return None


@serves(
    ApiKey.PRODUCE,
    3,
    11,
    access=per_resource(
        Check(ResourceType.TRANSACTIONAL_ID, Operation.WRITE, names_of("transactional_id")),
        Check(ResourceType.TOPIC, Operation.WRITE, names_of("topic_data", "name")),
    ),
)
async def handle_produce(broker: BrokerContext, request: Request) -> Reply:
    """Append every partition's batches on the event loop, then, for the partitions whose
    acknowledgement needs the disk (see :func:`_needs_fsync`), wait for the group commit
    (fsync off the loop) before answering; a partition whose fsync failed is answered
    KAFKA_STORAGE_ERROR. acks=0 gets no answer and does not wait, but the topic's flush
    policy still runs."""

    body = request.body
    tid = body.transactional_id
    if tid is not None and not broker.allowed(request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        # Kafka refuses a transactional producer's whole request before looking at topics
        refused = [
            (t.name, [PartitionProduceResult(p.index, error_code=_TID_DENIED) for p in t.partition_data])
            for t in body.topic_data
        ]
        return None if body.acks == 0 else RawBody([encode_produce_response(request.version, refused)])
    denied = {
        t.name
        for t in body.topic_data
        if not broker.allowed(request, Operation.WRITE, ResourceType.TOPIC, t.name)
    }
    recompressed = await _recompress_off_loop(broker, [t for t in body.topic_data if t.name not in denied])
    await _load_transactions(broker, body, denied)
    with defer_flushes() as appended:
        responses = [
            (
                topic.name,
                [
                    _append(broker, topic.name, p.index, recompressed.get((topic.name, p.index), p.records))
                    if topic.name not in denied
                    else PartitionProduceResult(p.index, error_code=ErrorCode.topic_authorization_failed)
                    for p in topic.partition_data
                ],
            )
            for topic in body.topic_data
        ]
    due = {log: appended.written[log] for log in appended.due}
    if body.acks == 0:
        if due:
            broker.group_commit.submit(due)
        return None
    ends = _needs_fsync(broker, responses, appended, due)
    if ends:
        failed = await broker.group_commit.durable(ends)
        if failed:
            responses = _fail_unflushed(responses, failed)
    return RawBody([encode_produce_response(request.version, responses)])


async def _recompress_off_loop(
    broker: BrokerContext, topic_data: Any
) -> dict[tuple[str, int], Records | Exception]:
    """The records of each partition whose topic's ``compression.type`` names a codec
    other than their batches', recompressed in worker threads (compression releases the
    GIL), or the error that refused them; ``{}`` at once for every other request.

    Compressing 1,000 records costs 0.1-2 ms (bench/recompress_bench.py): on the event
    loop it would stall every other connection for that long. The append itself, with
    its idempotence checks, stays on the loop (after this, so in request order: one
    connection's requests are handled one at a time) and finds the batches already in the
    topic's codec. A topic altered in between is recompressed on the loop, still right."""
    jobs: dict[tuple[str, int], tuple[PartitionLog, Records]] = {}
    for topic in topic_data:
        for p in topic.partition_data:
            try:
                log = broker.storage.log(topic.name, p.index)
            except StorageError:  # unknown, or a partition that cannot be opened
                continue  # answered by _append
            if p.records and log.recompresses(p.records):
                jobs[(topic.name, p.index)] = (log, p.records)
    if not jobs:
        return {}
    done = await asyncio.gather(
        *(asyncio.to_thread(log.recompressed, records) for log, records in jobs.values()),
        return_exceptions=True,
    )
    out: dict[tuple[str, int], Records | Exception] = {}
    for key, result in zip(jobs, done, strict=True):
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result
        out[key] = result
    return out


async def append_durably(broker: BrokerContext, topic: str, partition: int, batch: bytes) -> AppendResult:
    """One append on the broker's event loop with the acknowledgement rules of acks=all
    (REST produce next to the broker): under ``flush.messages=1`` or ``durable_acks`` it
    returns only once the group commit has fsynced the batch, and raises the fsync's
    error if that failed. Validation and errors are those of :meth:`PartitionLog.append`."""
    log = broker.storage.log(topic, partition)
    data: Records = await asyncio.to_thread(log.recompressed, batch) if log.recompresses(batch) else batch
    with defer_flushes() as appended:
        result = log.append(data)
    broker.notify_append()
    if log in appended.due or _acks_wait_for_disk(broker, log):
        failed = await broker.group_commit.durable({log: appended.written[log]})
        if failed:
            raise failed[log]
    return result


def _acks_wait_for_disk(broker: BrokerContext, log: PartitionLog) -> bool:
    """Whether acks=1/all on ``log`` are answered only after the fsync: the broker runs
    with ``durable_acks``, or the topic has ``flush.messages=1``."""
    return broker.config.durable_acks or log.config.flush_messages == 1


def _needs_fsync(
    broker: BrokerContext,
    responses: list[tuple[str, list[PartitionProduceResult]]],
    appended: DeferredFlushes,
    due: dict[PartitionLog, int],
) -> dict[PartitionLog, int]:
    """The offset each log must be fsynced below before acks=1/all is answered.

    A partition waits when its topic's ``flush.messages`` was reached (``due``; with
    ``flush.messages=1``, every append), or the broker runs with ``durable_acks``. acks=1
    waits as acks=all does: without replicas both mean "written by this broker", and
    ``flush.messages`` says every message is flushed before it is acknowledged. A batch
    answered from the idempotence cache (a retry) waits too: its first append may still be
    waiting for its own fsync.
    """
    ends = dict(due)
    for topic, results in responses:
        for result in results:
            if result.error_code or result.base_offset < 0:
                continue
            try:
                log = broker.storage.log(topic, result.index)
            except (UnknownTopicError, UnknownPartitionError):
                continue  # deleted since the append (by another thread): nothing left to flush
            if _acks_wait_for_disk(broker, log):
                end = appended.written.get(log, result.base_offset + 1)
                ends[log] = max(ends.get(log, 0), end)
    return ends


def _fail_unflushed(
    responses: list[tuple[str, list[PartitionProduceResult]]], failed: dict[PartitionLog, OSError]
) -> list[tuple[str, list[PartitionProduceResult]]]:
    """The responses with KAFKA_STORAGE_ERROR for the partitions that could not be fsynced
    (the records were written, so a retry may duplicate them, as in Kafka)."""
    errors = {(log.tp.topic, log.tp.partition): exc for log, exc in failed.items()}

    def answer(topic: str, result: PartitionProduceResult) -> PartitionProduceResult:
        exc = errors.get((topic, result.index))
        if exc is None:
            return result
        message = f"cannot fsync {topic}-{result.index}: {exc}"
        return PartitionProduceResult(
            result.index, error_code=ErrorCode.kafka_storage_error, error_message=message
        )

    return [(topic, [answer(topic, r) for r in results]) for topic, results in responses]
