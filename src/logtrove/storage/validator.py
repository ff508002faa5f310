"""The checks a batch passes before a partition's log stores it (Kafka's
``LogValidator``), and the recompression a topic's ``compression.type`` asks for.

::

    request bytes  ┌─────────────┬─────────────┬───
                   │ batch 1     │ batch 2     │ ...   framed by their length fields
                   └─────────────┴─────────────┴───
      1. split_batches           frame each, refuse one over max.message.bytes, check header + CRC32C
      2. recompress              (produce, compression.type names a codec) other codecs → that one
      3. check_produced_records  (produce) walk the records, decompressed to a bound; a compacted
                                 topic refuses keyless records
      4. place_batches           give each its offsets (produce) or keep them (not below the log end)

Everything is checked before anything is written: a request whose last batch fails
appends nothing. The functions read the bytes and the topic's config, never the log.
A follower append (:meth:`~logtrove.storage.log.PartitionLog.append_replicated`) runs
:func:`split_replicated_batches` (step 1 without the size limit, and a record walk of
its own) and keeps its offsets; it never recompresses.
"""

from __future__ import annotations

from logtrove.records import (
    BatchHeader,
    CorruptBatchError,
    InvalidLengthError,
    RecordsError,
    peek_batch_size,
    read_header,
    recompress_batch,
    validate_batch,
    validate_produced_batch,
)
from logtrove.records.batch import CODEC_BITS, MAX_OFFSET, MIN_BATCH_LENGTH
from logtrove.records.compression import decompressed_limit
from logtrove.records.errors import OffsetOverflowError
from logtrove.records.walk import Keyless, check_records, check_replicated_records
from logtrove.storage.config import TopicConfig
from logtrove.storage.errors import InvalidRecordError, RecordTooLargeError
from logtrove.storage.names import TopicPartition

Batches = list[tuple[int, BatchHeader]]
"""Each batch's byte position in the request and its header."""
Data = bytes | bytearray | memoryview


def split_batches(
    data: Data, config: TopicConfig, tp: TopicPartition, *, produced: bool, size_limit: bool = True
) -> Batches:
    """Frame and validate every batch of ``data`` (for partition ``tp``) before
    anything is written; with ``size_limit`` a batch over ``max.message.bytes`` is
    refused. ``produced`` batches must be a producer's (``recordCount ==
    lastOffsetDelta + 1``)."""
    max_size = config.max_message_bytes if size_limit else None
    out: Batches = []
    view = memoryview(data)
    pos = 0
    validate = validate_produced_batch if produced else validate_batch
    while pos < len(view):
        size = peek_batch_size(view, pos)
        if size is None or size > len(view) - pos:
            raise InvalidLengthError(f"truncated batch at byte {pos} of {len(view)}")
        if max_size is not None and size > max_size:
            raise RecordTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes={config.max_message_bytes} for {tp}"
            )
        out.append((pos, validate(view[pos : pos + size])))
        pos += size
    if not out:
        raise InvalidLengthError("no record batch in the request")
    return out


def split_replicated_batches(data: Data, config: TopicConfig, tp: TopicPartition) -> Batches:
    """A follower append's checks: every batch framed and validated (header, CRC) with no
    size limit (``max.message.bytes`` is the leader's business), and its records walked
    (:func:`~logtrove.records.walk.check_replicated_records`); nothing is rewritten."""
    batches = split_batches(data, config, tp, produced=False, size_limit=False)
    view = memoryview(data)
    limit = decompressed_limit(config.max_message_bytes)
    for pos, header in batches:
        check_replicated_records(view[pos : pos + header.size], header, limit)
    return batches


def place_batches(batches: Batches, log_end_offset: int, *, assign_offsets: bool) -> list[BatchHeader]:
    """The headers the batches will have in the log, checked before any is written (so
    that a request whose second batch overflows appends nothing): with
    ``assign_offsets`` consecutive offsets from ``log_end_offset``, else their own, which
    may not go below it (:class:`~logtrove.records.CorruptBatchError`)."""
    placed: list[BatchHeader] = []
    end = log_end_offset
    for _pos, header in batches:
        base = end if assign_offsets else header.base_offset
        if base < end:
            raise CorruptBatchError(f"batch offset {base} is below the log end offset {end}")
        if base + header.last_offset_delta > MAX_OFFSET:
            raise OffsetOverflowError(f"assigning offset {base} overflows int64")
        placed.append(header._replace(base_offset=base))
        end = placed[-1].next_offset
    return placed


def recompresses(data: Data, config: TopicConfig) -> bool:
    """Whether :func:`recompress` would change ``data``: the topic's
    ``compression.type`` names a codec and a batch is in another one. Reads the batch
    headers only (no CRC): damaged bytes answer ``False`` and fail in the append."""
    target = config.compression
    if target is None:
        return False
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        try:
            header = read_header(view, pos)
        except RecordsError:
            return False
        if header.batch_length < MIN_BATCH_LENGTH:
            return False
        if header.attributes & CODEC_BITS != target:
            return True
        pos += header.size
    return False


def recompress(data: Data, batches: Batches, config: TopicConfig, tp: TopicPartition) -> tuple[Data, Batches]:
    """The validated produced ``batches`` of ``data`` in the topic's codec (Kafka's
    LogValidator with a ``compression.type`` other than ``producer``), re-split; the
    same objects when there is nothing to do. A batch recompressed past
    ``max.message.bytes`` is refused, as Kafka checks the batch it stores."""
    target = config.compression
    if target is None or all(header.compression is target for _pos, header in batches):
        return data, batches
    view = memoryview(data)
    limit = decompressed_limit(config.max_message_bytes)
    out = bytearray()
    for pos, header in batches:
        batch = view[pos : pos + header.size]
        out += batch if header.compression is target else recompress_batch(batch, target, limit)
    return out, split_batches(out, config, tp, produced=True)


def check_produced_records(data: Data, batches: Batches, config: TopicConfig, tp: TopicPartition) -> None:
    """Walk the records of each produced batch (decompressed to at most
    :func:`~logtrove.records.compression.decompressed_limit` of ``max.message.bytes``)
    as Kafka's LogValidator does: :func:`logtrove.records.walk.check_records`.

    Compacted topics keep the latest record per key: a keyless record has no place
    in them and the batch is refused (Kafka's INVALID_RECORD), every keyless record
    named in ``record_errors`` as Kafka's LogValidator does, up to the walk's
    :data:`~logtrove.records.walk.MAX_KEYLESS_REPORTED` (the message gives the
    whole count)."""
    view = memoryview(data)
    limit = decompressed_limit(config.max_message_bytes)
    for pos, header in batches:
        keyless = check_records(view[pos : pos + header.size], header, limit)
        if keyless.total and config.compact:
            raise _keyless_refused(keyless, header.record_count, config, tp)


def _keyless_refused(
    keyless: Keyless, records: int, config: TopicConfig, tp: TopicPartition
) -> InvalidRecordError:
    why = f"Compacted topic cannot accept message without key in topic partition {tp}."
    named = "" if len(keyless.indexes) == keyless.total else f", the first {len(keyless.indexes)} named"
    return InvalidRecordError(
        f"{tp.topic} is a compacted topic (cleanup.policy={config.cleanup_policy}): "
        f"every record needs a key; {keyless.total} of the batch's {records} have none "
        f"(the first at batch offset +{keyless.indexes[0]}{named})",
        tuple((i, why) for i in keyless.indexes),
    )
