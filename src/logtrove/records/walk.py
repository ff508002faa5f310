"""Produce-time validation of a batch's records, as Kafka's LogValidator does it.

:func:`validate_produced` is what the log calls on every batch a producer sends, before
anything is written. On top of :func:`~logtrove.records.batch.validate_produced_batch`
(header, CRC32C, ``recordCount == lastOffsetDelta + 1``) it checks

* the codec is one of none, gzip, snappy, lz4, zstd
  (:class:`~logtrove.records.errors.UnsupportedCompressionError` otherwise);
* the records decompress, to at most ``limit`` bytes
  (:class:`~logtrove.records.errors.CorruptRecordError`,
  :class:`~logtrove.records.errors.DecompressionLimitError`);
* every record is whole and holds ``recordCount`` records, the offset delta of record
  ``i`` being ``i`` (:func:`walk`: ``CorruptRecordError`` /
  :class:`~logtrove.records.errors.InvalidRecordCountError`).

Kafka rewrites (recompresses) a compressed batch whose offset deltas are not 0, 1, 2, …
and ignores them in an uncompressed one; logtrove appends batches as they come, so it
refuses such a batch instead (no client writes one). Consumers compute each record's
offset from its delta: a wrong delta would make them loop or skip.

:func:`walk` runs compiled (``logtrove.records._walk``, from ``_walk.c``) when the
package was built with a C compiler, else its pure-Python twin :func:`py_walk`, which
defines the behaviour (same values, same messages); chosen with the rest of ``_walk`` as
:mod:`logtrove.native` says (``LOGTROVE_PURE_PYTHON=1`` forces the twin).
:data:`IMPLEMENTATION` says which one runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from logtrove.native import compiled, implementation
from logtrove.records.batch import BatchHeader, Buffer, validate_produced_batch
from logtrove.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from logtrove.records.errors import CorruptRecordError, InvalidRecordCountError
from logtrove.records.record import batch_payload, iter_records
from logtrove.records.varint import varint_below as _varint

MAX_KEYLESS_REPORTED = 1000
"""How many keyless records a walk names (the first ones, in order). A compacted topic
refuses a batch with keyless records and names each one in Produce's ``record_errors``;
the cap bounds the memory and the response that a hostile batch of a million empty
keyless records could cost. ``_walk.c`` has the same value (a test checks it)."""

WalkResult = tuple[int, int, tuple[int, ...]]
"""What :func:`walk` returns: ``(records, keyless records, indexes of the first``
:data:`MAX_KEYLESS_REPORTED` ``keyless records)``, a plain tuple so that both twins
return the same value."""


class Keyless(NamedTuple):
    """The records of a batch that have a null key."""

    total: int
    indexes: tuple[int, ...]  # in the batch, the first MAX_KEYLESS_REPORTED of them


class ProducedBatch(NamedTuple):
    """A produced batch that passed :func:`validate_produced`."""

    header: BatchHeader
    keyless: Keyless


def validate_produced(buf: Buffer, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> ProducedBatch:
    """Check one produced batch (exactly the bytes of ``buf``) down to its records.

    Raises a :class:`~logtrove.records.errors.RecordsError` saying what is wrong; see the
    module doc for the checks. ``limit`` bounds the decompressed size.
    """
    header = validate_produced_batch(buf)
    return ProducedBatch(header, check_records(buf, header, limit))


def check_records(buf: Buffer, header: BatchHeader, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> Keyless:
    """The record checks of :func:`validate_produced` for a batch whose header has passed
    :func:`~logtrove.records.batch.validate_produced_batch`; returns its keyless records
    (``total`` 0 when every record has a key)."""
    payload = batch_payload(buf, header, 0, limit)
    try:
        count, keyless, indexes = walk(payload)
    except ValueError as exc:
        raise CorruptRecordError(str(exc)) from None
    if count != header.record_count:
        raise InvalidRecordCountError(f"the batch declares {header.record_count} records and holds {count}")
    return Keyless(keyless, indexes)


def check_replicated_records(
    buf: Buffer, header: BatchHeader, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> None:
    """The record checks for a batch copied from a leader (a mirror's follower append),
    whose header has passed :func:`~logtrove.records.batch.validate_batch`.

    A batch with one offset per record gets the produce checks (:func:`check_records`).
    A batch the leader's cleaner compacted holds fewer records than offsets
    (``recordCount < lastOffsetDelta + 1``): its records are decoded (pure Python; only
    compacted batches take this path) and their offset deltas must rise strictly within
    ``[0, lastOffsetDelta]``. Keyless records pass: the leader accepted them, and a
    follower keeps what the leader has. Raises a
    :class:`~logtrove.records.errors.RecordsError` saying what is wrong.
    """
    if header.record_count == header.last_offset_delta + 1:
        check_records(buf, header, limit)
        return
    previous = -1
    for i, record in enumerate(iter_records(buf, 0, header, limit)):
        delta = record.offset - header.base_offset
        if not previous < delta <= header.last_offset_delta:
            raise CorruptRecordError(
                f"record {i} of the batch is malformed: its offset delta {delta} does not rise "
                f"within 0-{header.last_offset_delta} (previous {previous})"
            )
        previous = delta


def py_walk(payload: Buffer) -> WalkResult:
    """``(records, keyless records, indexes of the first`` :data:`MAX_KEYLESS_REPORTED`
    ``keyless records)`` of a produced batch's decompressed records section;
    :class:`ValueError` if a record is malformed.

    The record layout is drawn in :mod:`logtrove.records.record`. Checks: each length
    fits, every field fits its record and nothing is left over, record ``i`` has offset
    delta ``i``, header counts are not negative, header names are not null and are UTF-8.
    """
    b = memoryview(payload).cast("B")
    end = len(b)
    p = count = keyless = 0
    indexes: list[int] = []
    while p < end:
        length, p = _varint(b, end, p)
        if length is None or length < 0 or length > end - p:
            raise _malformed(count, "its length runs past the records")
        rec_end = p + length
        if p >= rec_end:
            raise _malformed(count, "it is empty")
        p += 1  # attributes
        ts_delta, p = _varint(b, rec_end, p)
        if ts_delta is None:
            raise _malformed(count, "truncated timestamp delta")
        off_delta, p = _varint(b, rec_end, p)
        if off_delta is None:
            raise _malformed(count, "truncated offset delta")
        if off_delta != count:
            raise _malformed(count, f"its offset delta is {off_delta}, expected {count}")
        klen, p = _varint(b, rec_end, p)
        if klen is None or klen > rec_end - p:
            raise _malformed(count, "truncated key")
        if klen >= 0:
            p += klen
        else:
            if keyless < MAX_KEYLESS_REPORTED:
                indexes.append(count)
            keyless += 1
        vlen, p = _varint(b, rec_end, p)
        if vlen is None or vlen > rec_end - p:
            raise _malformed(count, "truncated value")
        if vlen >= 0:
            p += vlen
        p = _walk_headers(b, rec_end, p, count)
        if p != rec_end:
            raise _malformed(count, "bytes left over after its fields")
        count += 1
    return count, keyless, tuple(indexes)


def py_first_at_or_after(
    payload: Buffer, base_ts: int, base_offset: int, timestamp: int, min_offset: int
) -> int | None:
    """The offset of the first record of a decompressed records section whose timestamp
    (``base_ts`` + delta) is ≥ ``timestamp`` and whose offset (``base_offset`` + delta)
    is ≥ ``min_offset``, or ``None``. Only each record's length, timestamp delta and
    offset delta are read; :class:`ValueError` if a record overruns the payload."""
    b = memoryview(payload).cast("B")
    end = len(b)
    p = count = 0
    while p < end:
        length, p = _varint(b, end, p)
        if length is None or length < 2 or length > end - p:
            raise _malformed(count, "its length runs past the records")
        rec_end = p + length
        ts_delta, q = _varint(b, rec_end, p + 1)  # after the attributes byte
        off_delta, q = _varint(b, rec_end, q) if ts_delta is not None else (None, q)
        if ts_delta is None or off_delta is None:
            raise _malformed(count, "truncated timestamp or offset delta")
        if base_ts + ts_delta >= timestamp and base_offset + off_delta >= min_offset:
            return base_offset + off_delta
        p = rec_end
        count += 1
    return None


def _walk_headers(b: memoryview, rec_end: int, p: int, record: int) -> int:
    n, p = _varint(b, rec_end, p)
    if n is None or n < 0:
        raise _malformed(record, "bad header count")
    for _ in range(n):  # each header takes 2 bytes or more: a lying count ends quickly
        nlen, p = _varint(b, rec_end, p)
        if nlen is None or nlen < 0 or nlen > rec_end - p:
            raise _malformed(record, "truncated header name")
        try:
            bytes(b[p : p + nlen]).decode("utf-8")
        except UnicodeDecodeError:
            raise _malformed(record, "a header name is not UTF-8") from None
        p += nlen
        hlen, p = _varint(b, rec_end, p)
        if hlen is None or hlen > rec_end - p:
            raise _malformed(record, "truncated header value")
        if hlen >= 0:
            p += hlen
    return p


def _malformed(record: int, what: str) -> ValueError:
    return ValueError(f"record {record} of the batch is malformed: {what}")


FirstAtOrAfter = Callable[[Buffer, int, int, int, int], "int | None"]


NATIVE = compiled("logtrove.records._walk")
IMPLEMENTATION = implementation(NATIVE)
walk: Callable[[Buffer], WalkResult] = NATIVE.walk if NATIVE is not None else py_walk
first_at_or_after: FirstAtOrAfter = NATIVE.first_at_or_after if NATIVE is not None else py_first_at_or_after
