"""Building RecordBatch v2 bytes, as a Kafka producer would, and recompressing one.

The layout matches the Java client and kafka-python: ``baseTimestamp`` is the first
record's timestamp, ``maxTimestamp`` the largest, offset deltas count from 0, and the
CRC32C covers attributes to the end. Uncompressed output is byte-identical to theirs
for the same inputs (tested against kafka-python's builder).

:func:`recompress_batch` is what a topic with a named ``compression.type`` does to a
batch in another codec (Kafka's LogValidator rebuilds it): the records section is
decompressed (bounded) and compressed again; the records' bytes, offsets, timestamps and
producer fields stay, only the codec bits, ``batchLength`` and the CRC change.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.records.batch import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CODEC_BITS,
    CRC_START,
    HEADER,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    validate_batch,
)
from logtrove.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression, compress
from logtrove.records.record import NewRecord, Record, batch_payload, encode_record

_CRC = struct.Struct(">I")
_CRC_POS = 17


def build_batch(
    records: Sequence[NewRecord | Record],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    delete_horizon: int | None = None,
) -> bytes:
    """Encode ``records`` as one batch.

    ``offset_deltas`` / ``last_offset_delta`` / ``base_timestamp`` let the cleaner
    re-encode a batch that lost records to compaction while keeping every surviving
    record's offset and the batch's offset span; producers leave them unset.
    ``delete_horizon`` (cleaner only) sets attribute bit 6 and stores the horizon in
    ``baseTimestamp``; record timestamps stay exact because their deltas are relative to it.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    now = None
    timestamps: list[int] = []
    for r in records:
        ts = r.timestamp
        if ts is None:
            now = clock.now_ms() if now is None else now
            ts = now
        timestamps.append(ts)
    base_ts = timestamps[0] if base_timestamp is None else base_timestamp
    if delete_horizon is not None:
        base_ts = delete_horizon
    deltas = list(range(len(records))) if offset_deltas is None else list(offset_deltas)
    if len(deltas) != len(records):
        raise ValueError("offset_deltas must give one delta per record")
    payload = b"".join(
        encode_record(delta, ts - base_ts, r)
        for delta, ts, r in zip(deltas, timestamps, records, strict=True)
    )
    payload = compress(compression, payload)
    attributes = int(compression)
    if log_append_time:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    if delete_horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
    last_delta = deltas[-1] if last_offset_delta is None else last_offset_delta
    header = BatchHeader(
        base_offset,
        0,  # batchLength and crc: set by _framed
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_delta,
        base_ts,
        max(timestamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    return _framed(header, payload)


def frame_records(
    payload: bytes, count: int, base_ts: int, max_ts: int, compression: Compression = Compression.NONE
) -> bytes:
    """A producer's batch around ``payload``, the uncompressed records section of ``count``
    records with offset deltas 0 to ``count - 1`` and timestamp deltas from ``base_ts``
    (as :func:`logtrove.records.encoder.encode_records` makes it), compressed with
    ``compression``: the bytes :func:`build_batch` gives for the same records."""
    if count < 1:
        raise ValueError("a record batch needs at least one record")
    header = BatchHeader(0, 0, -1, 2, 0, int(compression), count - 1, base_ts, max_ts, -1, -1, -1, count)
    return _framed(header, compress(compression, payload))


def recompress_batch(buf: Buffer, codec: Compression, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """The one batch in ``buf`` with its records compressed in ``codec`` instead.

    The batch is checked first (:func:`~logtrove.records.batch.validate_batch`: header,
    length, CRC32C), so that damaged bytes never get a fresh CRC, and its records are
    decompressed to at most ``limit`` bytes. The records themselves are not decoded:
    the caller walks the result (the log's produce checks do). Every header field but
    the codec bits, ``batchLength`` and the CRC is kept; a batch already in ``codec`` is
    returned as it is.

    Raises :class:`~logtrove.records.errors.CorruptBatchError` for a damaged batch,
    :class:`~logtrove.records.errors.CorruptRecordError` for records that do not
    decompress (:class:`~logtrove.records.errors.DecompressionLimitError` past ``limit``)
    and :class:`~logtrove.records.errors.UnsupportedCompressionError` for codec ids 5-7.
    """
    header = validate_batch(buf)
    if header.compression is codec:
        return bytes(buf)
    payload = compress(codec, bytes(batch_payload(buf, header, 0, limit)))
    return _framed(header._replace(attributes=(header.attributes & ~CODEC_BITS) | int(codec)), payload)


def _framed(header: BatchHeader, payload: bytes) -> bytes:
    """``header`` (its ``batchLength`` and ``crc`` recomputed) followed by ``payload``."""
    head = bytearray(HEADER.pack(*header._replace(batch_length=HEADER.size - LOG_OVERHEAD + len(payload))))
    _CRC.pack_into(head, _CRC_POS, crc32c.crc32c(payload, crc32c.crc32c(memoryview(head)[CRC_START:])))
    return bytes(head) + payload
