"""Produce and InitProducerId, with idempotent-producer de-duplication.

A produced batch is validated and appended as-is by the storage layer (no per-record
work), unless its topic's ``compression.type`` names another codec: then it is
recompressed in a worker thread first (:func:`_recompress_off_loop`). An idempotent producer (a batch with ``producerId >= 0``) numbers its batches per
partition; the broker remembers the last :data:`RECENT_BATCHES` batches of each
(producer, partition) and

* answers a batch it has already appended (same first and last sequence — a retry whose
  first answer was lost) with the original offsets and no error, without appending again;
* refuses a batch that skips sequence numbers with ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* accepts any sequence from a producer it knows nothing of, or after its epoch changed.

Producer state is not persisted: after a restart (or once a pair fell out of the
:data:`MAX_TRACKED` most recently used) a producer's first batch with a sequence above 0
makes the broker read the headers of the last :data:`RESCAN_OFFSETS` offsets of that
partition for the producer's recent batches, so a retry of a batch appended just before
a crash is still recognised.

Producer IDs are ``start time in ms × 1024 + n``, unique across restarts without state.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import Operation, ResourceType
from logtrove.broker.errors import error_code
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
from logtrove.wire.produce import PartitionProduceResult, encode_produce_response

if TYPE_CHECKING:
    from logtrove.broker.requests import Reply, Request
    from logtrove.broker.server import Broker

RECENT_BATCHES = 5
SEQUENCE_WRAP = 2**31
RESCAN_OFFSETS = 10_000  # how far back the log is searched for an unknown producer's batches
MAX_TRACKED = 100_000  # (producer, partition) pairs remembered; the least recently used go first


@dataclass(frozen=True, slots=True)
class _Appended:
    first_seq: int
    last_seq: int
    base_offset: int


@dataclass
class _ProducerPartition:
    epoch: int
    recent: deque[_Appended]


class ProducerStates:
    """Recent sequence numbers per (producer ID, topic, partition)."""

    def __init__(self, start_ms: int) -> None:
        self._next_id = start_ms * 1024
        self._state: OrderedDict[tuple[int, str, int], _ProducerPartition] = OrderedDict()

    def new_producer_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def check(self, log: PartitionLog, pid: int, epoch: int, first_seq: int, count: int) -> _Appended | int:
        """A remembered batch (a duplicate), or an error code (0 = append it)."""
        key = (pid, log.tp.topic, log.tp.partition)
        state = self._state.get(key)
        if state is None and first_seq > 0:
            state = self._rebuild(log, pid, epoch)
        if state is None or state.epoch != epoch or not state.recent:
            return 0
        last_seq = (first_seq + count - 1) % SEQUENCE_WRAP
        for seen in state.recent:
            if seen.first_seq == first_seq and seen.last_seq == last_seq:
                return seen
        expected = (state.recent[-1].last_seq + 1) % SEQUENCE_WRAP
        return 0 if first_seq == expected else int(ErrorCode.out_of_order_sequence_number)

    def _rebuild(self, log: PartitionLog, pid: int, epoch: int) -> _ProducerPartition | None:
        """The producer's last batches among the last :data:`RESCAN_OFFSETS` offsets of the
        log, by batch headers: after a restart a producer retries its in-flight batches,
        and those that were appended before the crash must be recognised."""
        start = max(log.log_start_offset, log.log_end_offset - RESCAN_OFFSETS)
        first = log.read(start, 1).slice if start < log.log_end_offset else None
        if first is None:
            return None
        state = _ProducerPartition(epoch, deque(maxlen=RECENT_BATCHES))
        for seg in log.segments:
            if seg.base_offset < first.segment.base_offset:
                continue
            for _pos, header in seg.batches(first.position if seg is first.segment else 0):
                if header.producer_id == pid and header.producer_epoch == epoch:
                    state.recent.append(
                        _Appended(
                            header.base_sequence,
                            (header.base_sequence + header.record_count - 1) % SEQUENCE_WRAP,
                            header.base_offset,
                        )
                    )
        if not state.recent:
            return None
        self._state[(pid, log.tp.topic, log.tp.partition)] = state
        return state

    def active(self, topic: str, partition: int) -> list[tuple[int, int, int]]:
        """``(producer ID, epoch, last sequence)`` of each producer remembered for the
        partition (DescribeProducers; a scan of every remembered pair, an admin call)."""
        return [
            (pid, state.epoch, state.recent[-1].last_seq)
            for (pid, t, p), state in list(self._state.items())
            if t == topic and p == partition and state.recent
        ]

    def record(
        self, pid: int, epoch: int, topic: str, partition: int, first_seq: int, count: int, base: int
    ) -> None:
        key = (pid, topic, partition)
        state = self._state.get(key)
        if state is None or state.epoch != epoch:
            state = self._state[key] = _ProducerPartition(epoch, deque(maxlen=RECENT_BATCHES))
            if len(self._state) > MAX_TRACKED:
                self._state.popitem(last=False)
        self._state.move_to_end(key)
        state.recent.append(_Appended(first_seq, (first_seq + count - 1) % SEQUENCE_WRAP, base))


async def handle_init_producer_id(broker: Broker, request: Request) -> Reply:
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


def _may_write_idempotently(broker: Broker, request: Request) -> bool:
    """IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KIP-679)."""
    auth = broker.authorizer
    if auth is None or auth.authorize_any(
        request.principal, request.host, Operation.WRITE, ResourceType.TOPIC
    ):
        return True
    return broker.allowed_cluster(request, Operation.IDEMPOTENT_WRITE)  # with its audit line if denied


Records = bytes | bytearray | memoryview


def _append(
    broker: Broker, topic: str, partition: int, records: Records | Exception | None
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
            if isinstance(verdict, _Appended):
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


async def _load_transactions(broker: Broker, body: Any) -> None:
    """Build, off the event loop, the transaction state of the partitions this request
    writes transactional batches to (once per partition after a start; see
    TxnIndexes.load), so that the appends never walk a log on the loop."""
    for topic in body.topic_data:
        for p in topic.partition_data:
            records = p.records
            if not records or len(records) < HEADER_SIZE or not read_header(records, 0).is_transactional:
                continue
            try:
                await broker.txn.indexes.load(broker.storage.log(topic.name, p.index))
            except StorageError:
                continue  # answered with its error by _append


def _check_transactional(
    broker: Broker, header: BatchHeader, topic: str, partition: int
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


async def handle_produce(broker: Broker, request: Request) -> Reply:
    """Append every partition's batches on the event loop, then, for the partitions whose
    acknowledgement needs the disk (see :func:`_needs_fsync`), wait for the group commit
    (fsync off the loop) before answering; a partition whose fsync failed is answered
    KAFKA_STORAGE_ERROR. acks=0 gets no answer and does not wait, but the topic's flush
    policy still runs."""

    body = request.body
    denied = {
        t.name
        for t in body.topic_data
        if not broker.allowed(request, Operation.WRITE, ResourceType.TOPIC, t.name)
    }
    recompressed = await _recompress_off_loop(broker, [t for t in body.topic_data if t.name not in denied])
    await _load_transactions(broker, body)
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


async def _recompress_off_loop(broker: Broker, topic_data: Any) -> dict[tuple[str, int], Records | Exception]:
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
            except (UnknownTopicError, UnknownPartitionError):
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


async def append_durably(broker: Broker, topic: str, partition: int, batch: bytes) -> AppendResult:
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


def _acks_wait_for_disk(broker: Broker, log: PartitionLog) -> bool:
    """Whether acks=1/all on ``log`` are answered only after the fsync: the broker runs
    with ``durable_acks``, or the topic has ``flush.messages=1``."""
    return broker.config.durable_acks or log.config.flush_messages == 1


def _needs_fsync(
    broker: Broker,
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
