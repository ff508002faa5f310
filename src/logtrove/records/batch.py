"""RecordBatch v2 framing: the 61-byte header, validation, and offset assignment.

Layout of one batch (big-endian)::

    offset  size  field
    ┌──────┬─────┬──────────────────────────────────────────────────────────────┐
    │    0 │   8 │ baseOffset            i64   first offset of the batch         │
    │    8 │   4 │ batchLength           i32   bytes after this field            │
    │   12 │   4 │ partitionLeaderEpoch  i32                                     │
    │   16 │   1 │ magic                 i8    = 2                               │
    │   17 │   4 │ crc                   u32   CRC32C of bytes [21, end)         │
    │   21 │   2 │ attributes            i16   bits 0-2 codec, 3 ts type,        │
    │      │     │                             4 transactional, 5 control,       │
    │      │     │                             6 delete horizon in baseTimestamp │
    │   23 │   4 │ lastOffsetDelta       i32                                     │
    │   27 │   8 │ baseTimestamp         i64                                     │
    │   35 │   8 │ maxTimestamp          i64                                     │
    │   43 │   8 │ producerId            i64                                     │
    │   51 │   2 │ producerEpoch         i16                                     │
    │   53 │   4 │ baseSequence          i32                                     │
    │   57 │   4 │ recordCount           i32                                     │
    │   61 │   … │ records (compressed as a whole when the codec is not none)    │
    └──────┴─────┴──────────────────────────────────────────────────────────────┘

Invariants the broker relies on:

* ``batchLength + 12`` is the total size, so batches can be walked back to back by
  reading headers only.
* ``baseOffset`` and ``partitionLeaderEpoch`` are outside the CRC: the log assigns
  offsets by patching the first 8 bytes, without re-encoding or re-checksumming.
* A batch as produced has ``recordCount == lastOffsetDelta + 1``. After compaction a
  batch may hold fewer records than its offset span (``recordCount <= lastOffsetDelta + 1``);
  the span stays so that offsets never change.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from logtrove.records.compression import Compression
from logtrove.records.errors import (
    CrcMismatchError,
    InvalidLengthError,
    InvalidMagicError,
    InvalidRecordCountError,
    OffsetOverflowError,
)

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
CRC_START = 21
MAGIC_V2 = 2
MAX_OFFSET = 2**63 - 1

_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_LENGTH_PREFIX = struct.Struct(">qi")

CODEC_BITS = 0x07  # attributes bits 0-2: the Compression id
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40  # baseTimestamp holds the tombstones' delete horizon (KIP-534)


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of one RecordBatch v2, decoded."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression.from_attributes(self.attributes)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may drop this batch's tombstones, if it has stamped one."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record (idempotent producers), wrapping at 2**31."""
        if self.base_sequence < 0:
            return self.base_sequence
        return (self.base_sequence + self.last_offset_delta) % (2**31)


Buffer = bytes | bytearray | memoryview


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the header of the batch starting at ``pos`` (no CRC check).

    Raises :class:`InvalidLengthError` when fewer than 61 bytes remain, and
    :class:`InvalidMagicError` for a magic other than 2.
    """
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidLengthError(f"batch header needs {HEADER_SIZE} bytes, only {len(buf) - pos} present")
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC_V2:
        raise InvalidMagicError(f"magic byte is {header.magic}; only RecordBatch v2 (magic 2) is supported")
    return header


def peek_batch_size(buf: Buffer, pos: int = 0) -> int | None:
    """Total size of the batch at ``pos`` from its length field, or ``None`` if the
    12-byte prefix is not all there. Used to frame batches while walking a file."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    _, length = _LENGTH_PREFIX.unpack_from(buf, pos)
    return int(length) + LOG_OVERHEAD


def validate_batch(buf: Buffer, pos: int = 0, *, expect_full: bool = True) -> BatchHeader:
    """Check one batch without decoding its records and return its header.

    Checks, in order: the header is present; magic is 2; ``batchLength`` is at least the
    header and (with ``expect_full``) accounts for exactly the bytes present from ``pos``;
    the CRC32C matches; ``recordCount`` and ``lastOffsetDelta`` are consistent
    (``0 <= recordCount <= lastOffsetDelta + 1``); the offset span fits an int64.
    Each failure raises its own :class:`~logtrove.records.errors.CorruptBatchError`.
    """
    header = read_header(buf, pos)
    size = header.size
    if header.batch_length < MIN_BATCH_LENGTH:
        raise InvalidLengthError(
            f"batchLength {header.batch_length} is smaller than the header ({MIN_BATCH_LENGTH})"
        )
    available = len(buf) - pos
    if size > available:
        raise InvalidLengthError(f"batch is truncated: batchLength says {size} bytes, {available} present")
    if expect_full and size != available:
        raise InvalidLengthError(f"{available - size} trailing bytes after a {size}-byte batch")
    view = memoryview(buf)[pos + CRC_START : pos + size]
    actual = crc32c.crc32c(view)
    if actual != header.crc:
        raise CrcMismatchError(f"CRC32C mismatch: stored {header.crc:#010x}, computed {actual:#010x}")
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise InvalidRecordCountError(
            f"negative lastOffsetDelta ({header.last_offset_delta}) or recordCount ({header.record_count})"
        )
    if header.record_count > header.last_offset_delta + 1:
        raise InvalidRecordCountError(
            f"recordCount {header.record_count} exceeds the offset span {header.last_offset_delta + 1}"
        )
    if header.base_offset < 0 or header.base_offset + header.last_offset_delta > MAX_OFFSET:
        raise OffsetOverflowError(f"offsets of batch at {header.base_offset} overflow int64")
    return header


def validate_produced_batch(buf: Buffer) -> BatchHeader:
    """:func:`validate_batch` plus the rule for batches from producers: one offset per
    record, ``recordCount == lastOffsetDelta + 1``, and at least one record."""
    header = validate_batch(buf)
    if header.record_count != header.last_offset_delta + 1 or header.record_count == 0:
        raise InvalidRecordCountError(
            f"recordCount {header.record_count} does not match lastOffsetDelta "
            f"{header.last_offset_delta} (a produced batch has one offset per record)"
        )
    return header


def set_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Assign offsets to a batch by overwriting its ``baseOffset`` (outside the CRC)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_log_append_time(buf: bytearray | memoryview, timestamp: int) -> None:
    """Mark a batch as LogAppendTime with ``timestamp`` as its max timestamp, and
    re-checksum it (both fields are inside the CRC). Consumers then read ``timestamp``
    as every record's timestamp, as in Kafka."""
    header = read_header(buf)
    patched = header._replace(attributes=header.attributes | ATTR_TIMESTAMP_TYPE, max_timestamp=timestamp)
    HEADER.pack_into(buf, 0, *patched)
    crc = crc32c.crc32c(memoryview(buf)[CRC_START : header.size])
    _CRC.pack_into(buf, 17, crc)


def assign_offsets(buf: bytearray | memoryview, base_offset: int, header: BatchHeader) -> BatchHeader:
    """Patch ``baseOffset`` and return the header as it now reads.

    Raises :class:`OffsetOverflowError` if the batch's last offset would pass int64.
    """
    if base_offset + header.last_offset_delta > MAX_OFFSET:
        raise OffsetOverflowError(
            f"assigning base offset {base_offset} to a batch spanning "
            f"{header.last_offset_delta + 1} offsets overflows int64"
        )
    set_base_offset(buf, base_offset)
    return header._replace(base_offset=base_offset)
