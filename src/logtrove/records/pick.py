"""Picking records out of a batch for the query engine, without decoding the others.

A point lookup wants one record of a batch (:func:`pick_offset`); a time-range scan wants
the records stamped inside a window, and most batches it reads have none
(:func:`pick_window`); the unindexed tail of a busy partition is summarised by its
timestamps once (:func:`time_bounds`); a histogram counts a batch's records per time
bucket (:func:`count_times`); a key lookup's candidate is found among the batches
of one read of the log, and picked from an uncompressed one, in one call
(:func:`find_record`). They read the batch's decompressed records section (the layout is
drawn in :mod:`logtrove.records.record`) and give records as plain tuples
``(offset, timestamp, key, value, headers)``, the fields of
:class:`~logtrove.records.Record`, exactly as :func:`~logtrove.records.iter_records`
decodes them (a LogAppendTime batch: every timestamp is ``append_ts``).

They are strict, stricter than the readers in :mod:`logtrove.records.record`: a varint
longer than 10 bytes or whose value does not fit 64 bits, a field past its record, a
record past the payload or shorter than 2 bytes, offset deltas that do not rise, a
negative header count, a null or non-UTF-8 header name, bytes left over after a record's
fields, or an offset or timestamp past 64 bits raise :class:`ValueError`. The caller then
answers with those readers (``logtrove.query.pick``), so that a damaged batch gives what
it gave before and a batch both accept gives the same records: the readers accept all
that these accept, with the same values.

Two implementations: ``logtrove.records._walk`` (compiled from ``_walk.c``) and the
pure-Python twins below, which define the behaviour (the same values and messages;
``tests/records/test_pick.py`` checks it under hypothesis, on valid, damaged and random
bytes; those tests and the query tests run clean with ``_walk.c`` built under ASan and
UBSan). Chosen with the rest of ``_walk`` as :mod:`logtrove.native` says
(``LOGTROVE_PURE_PYTHON=1`` forces the twins); :data:`IMPLEMENTATION` says which run.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable

from logtrove.native import compiled, implementation
from logtrove.records.batch import (
    ATTR_TIMESTAMP_TYPE,
    CODEC_BITS,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Buffer,
)
from logtrove.records.errors import RecordsError
from logtrove.records.record import Record, batch_payload, iter_records

RecordTuple = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
WindowPick = tuple[int, list[RecordTuple]] | None

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _varint(b: memoryview, end: int, p: int) -> tuple[int, int]:
    """A zig-zag varint of at most 10 bytes below ``end`` whose value fits 64 bits."""
    r = 0
    for i in range(10):
        if p >= end:
            raise _UnfitError
        c = b[p]
        p += 1
        if i == 9 and c > 1:
            raise _UnfitError
        r |= (c & 0x7F) << (7 * i)
        if c < 0x80:
            return (r >> 1) ^ -(r & 1), p
    raise _UnfitError


class _UnfitError(Exception):
    """A varint that does not fit (turned into the record's ValueError)."""


def _bad(record: int, what: str) -> ValueError:
    return ValueError(f"record {record}: {what}")


def _frame(b: memoryview, end: int, p: int, index: int) -> tuple[int, int, int, int]:
    """(record end, timestamp delta, offset delta, position after the offset delta)."""
    try:
        length, p = _varint(b, end, p)
    except _UnfitError:
        raise _bad(index, "its length runs past the records") from None
    if length < 2 or length > end - p:
        raise _bad(index, "its length runs past the records")
    rec_end = p + length
    try:
        ts_delta, p = _varint(b, rec_end, p + 1)  # after the attributes byte
        off_delta, p = _varint(b, rec_end, p)
    except _UnfitError:
        raise _bad(index, "truncated timestamp or offset delta") from None
    return rec_end, ts_delta, off_delta, p


def _field(b: memoryview, rec_end: int, p: int, length: int, keep: bool) -> tuple[bytes | None, int]:
    if length < 0:
        return None, p
    if length > rec_end - p:
        raise _UnfitError
    return (bytes(b[p : p + length]) if keep else None), p + length


def _fields(
    b: memoryview, rec_end: int, p: int, index: int, offset: int, ts: int, keep: bool
) -> RecordTuple | None:
    """Check the key, value and headers of the record ending at ``rec_end`` (its fields
    after the offset delta start at ``p``), and decode them when ``keep``."""
    what = "truncated key"
    try:
        klen, p = _varint(b, rec_end, p)
        key, p = _field(b, rec_end, p, klen, keep)
        what = "truncated value"
        vlen, p = _varint(b, rec_end, p)
        value, p = _field(b, rec_end, p, vlen, keep)
        what = "bad header count"
        n, p = _varint(b, rec_end, p)
        if n < 0 or n > rec_end - p:  # each header takes 2 bytes or more
            raise _UnfitError
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(n):
            what = "truncated header name"
            nlen, p = _varint(b, rec_end, p)
            if nlen < 0 or nlen > rec_end - p:
                raise _UnfitError
            try:
                name = bytes(b[p : p + nlen]).decode("utf-8")
            except UnicodeDecodeError:
                what = "a header name is not UTF-8"
                raise _UnfitError from None
            p += nlen
            what = "truncated header value"
            hlen, p = _varint(b, rec_end, p)
            hval, p = _field(b, rec_end, p, hlen, keep)
            headers.append((name, hval))
    except _UnfitError:
        raise _bad(index, what) from None
    if p != rec_end:
        raise _bad(index, "bytes left over after its fields")
    return (offset, ts, key, value, tuple(headers)) if keep else None


def _add(a: int, b: int) -> int:
    total = a + b
    if not _INT64_MIN <= total <= _INT64_MAX:
        raise _UnfitError
    return total


def py_pick_window(
    payload: Buffer,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    start_ms: int | None,
    end_ms: int | None,
    min_offset: int,
    max_offset: int,
    limit: int = -1,
) -> WindowPick:
    """``None`` when no record's timestamp is in ``[start_ms, end_ms)`` (``None``:
    unbounded), found from record lengths and timestamp deltas alone (a LogAppendTime
    batch: from ``append_ts``); else ``(records in the payload, the first ``limit``
    (negative: all) of the records in the window whose offset is in [min_offset,
    max_offset))``, every record checked either way."""
    b = memoryview(payload).cast("B")
    end = len(b)
    if append_ts is not None:
        lo = hi = append_ts
    else:
        lo, hi = py_time_bounds(b, base_ts)
    if (start_ms is not None and hi < start_ms) or (end_ms is not None and lo >= end_ms):
        return None
    picked: list[RecordTuple] = []
    p = count = previous = 0
    while p < end:
        rec_end, ts_delta, off_delta, q = _frame(b, end, p, count)
        if count > 0 and off_delta <= previous:
            raise _bad(count, "its offset delta does not rise")
        previous = off_delta
        try:
            offset = _add(base_offset, off_delta)
            ts = append_ts if append_ts is not None else _add(base_ts, ts_delta)
        except _UnfitError:
            raise _bad(count, "its offset or timestamp does not fit 64 bits") from None
        wanted = (
            (start_ms is None or ts >= start_ms)
            and (end_ms is None or ts < end_ms)
            and min_offset <= offset < max_offset
            and (limit < 0 or len(picked) < limit)
        )
        record = _fields(b, rec_end, q, count, offset, ts, wanted)
        if record is not None:
            picked.append(record)
        p = rec_end
        count += 1
    return count, picked


def py_pick_offset(
    payload: Buffer, base_offset: int, base_ts: int, append_ts: int | None, offset: int
) -> RecordTuple | None:
    """The record at ``offset``, or ``None`` when the first record at or after it has a
    larger offset or there is none; records after it are not read."""
    b = memoryview(payload).cast("B")
    end = len(b)
    p = count = previous = 0
    while p < end:
        rec_end, ts_delta, off_delta, q = _frame(b, end, p, count)
        if count > 0 and off_delta <= previous:
            raise _bad(count, "its offset delta does not rise")
        previous = off_delta
        try:
            at = _add(base_offset, off_delta)
            ts = append_ts if append_ts is not None else _add(base_ts, ts_delta)
        except _UnfitError:
            raise _bad(count, "its offset or timestamp does not fit 64 bits") from None
        if at > offset:
            return None
        if at == offset:
            return _fields(b, rec_end, q, count, at, ts, True)
        p = rec_end
        count += 1
    return None


FoundRecord = tuple[int, "RecordTuple | None"] | int | None


def py_find_record(buf: Buffer, room: int, offset: int) -> FoundRecord:
    """The record at ``offset`` among the batches that start at ``buf[0]``, read from a
    log that holds ``room`` bytes from there (``buf`` may end mid-batch): a key lookup's
    candidate check in one call.

    The batches are walked by their headers as :func:`logtrove.query.picking.batch_holding`
    walks them, to the first whose last offset is ≥ ``offset``. Answers:

    * ``None``: that batch starts past ``offset`` (a compaction gap);
    * ``(batch size, record or None)``: that batch is uncompressed and wholly in ``buf``,
      and :func:`py_pick_offset` gave the record (or ``None``: no record at ``offset``);
    * the batch's position in ``buf``: it is wholly in ``buf`` but compressed, or
      :func:`py_pick_offset` refused it (the caller decompresses or reads it row-wise);
    * ``-1``: ``buf`` does not decide (a header cut short, damaged or running past
      ``room``, a batch ending past ``buf``, or no such batch in ``buf``): the caller
      reads the log as before.
    """
    b = memoryview(buf).cast("B")
    n, rel = len(b), 0
    while rel <= n - HEADER_SIZE:
        header = BatchHeader._make(HEADER.unpack_from(b, rel))
        size = header.batch_length + LOG_OVERHEAD
        last = header.base_offset + header.last_offset_delta
        if (
            header.magic != MAGIC_V2
            or header.batch_length < MIN_BATCH_LENGTH
            or size > room - rel
            or not _INT64_MIN <= last <= _INT64_MAX
        ):
            break
        if last < offset:
            rel += size
            continue
        if size > n - rel:
            break
        if header.base_offset > offset:
            return None
        if header.attributes & CODEC_BITS:
            return rel
        append_ts = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
        payload = b[rel + HEADER_SIZE : rel + size]
        try:
            return size, py_pick_offset(payload, header.base_offset, header.base_timestamp, append_ts, offset)
        except ValueError:
            return rel
    return -1


def py_time_bounds(payload: Buffer, base_ts: int) -> tuple[int, int]:
    """The smallest and largest record timestamp (``base_ts`` + delta) of a records
    section, from record lengths and timestamp deltas alone (the framing
    :func:`py_pick_window` checks first)."""
    b = memoryview(payload).cast("B")
    end = len(b)
    p = count = 0
    lo, hi = _INT64_MAX, _INT64_MIN
    while p < end:
        p, ts_delta, _, _ = _frame(b, end, p, count)
        try:
            ts = _add(base_ts, ts_delta)
        except _UnfitError:
            raise _bad(count, "its timestamp does not fit 64 bits") from None
        lo, hi = min(lo, ts), max(hi, ts)
        count += 1
    if count == 0:
        raise _bad(0, "the batch holds no record")
    return lo, hi


def py_count_times(
    payload: Buffer, base_ts: int, base_offset: int, min_offset: int, edges: array[int], counts: array[int]
) -> int:
    """Add to ``counts[i]`` (``n`` native int64, writable) the records of a records section
    whose offset (``base_offset`` + delta) is ≥ ``min_offset`` and whose timestamp
    (``base_ts`` + delta) is in ``[edges[i], edges[i+1])`` (``n + 1`` increasing native
    int64), from record lengths and timestamp and offset deltas alone; returns how many
    records were framed. A record refused by the framing :func:`py_pick_window` checks
    raises :class:`ValueError` and nothing is added."""
    b = memoryview(payload).cast("B")
    e, c = edges, counts
    n = len(c)
    if n < 1 or len(e) != n + 1 or e.typecode != "q" or c.typecode != "q":
        raise ValueError("count_times: edges must hold one int64 more than counts (at least 1)")
    end = len(b)
    local = [0] * n
    first, last = e[0], e[n]
    inner = e.tolist()[1:n]
    p = count = 0
    while p < end:
        p, ts_delta, off_delta, _ = _frame(b, end, p, count)
        try:
            offset = _add(base_offset, off_delta)
            ts = _add(base_ts, ts_delta)
        except _UnfitError:
            raise _bad(count, "its offset or timestamp does not fit 64 bits") from None
        count += 1
        if offset >= min_offset and first <= ts < last:
            local[bisect.bisect_right(inner, ts)] += 1
    for i, k in enumerate(local):
        c[i] += k
    return count


PickWindow = Callable[[Buffer, int, int, "int | None", "int | None", "int | None", int, int, int], WindowPick]
PickOffset = Callable[[Buffer, int, int, "int | None", int], "RecordTuple | None"]
TimeBounds = Callable[[Buffer, int], tuple[int, int]]
FindRecord = Callable[[Buffer, int, int], FoundRecord]
CountTimes = Callable[[Buffer, int, int, int, "array[int]", "array[int]"], int]


NATIVE = compiled("logtrove.records._walk")
IMPLEMENTATION = implementation(NATIVE)
pick_window: PickWindow = NATIVE.pick_window if NATIVE is not None else py_pick_window
pick_offset: PickOffset = NATIVE.pick_offset if NATIVE is not None else py_pick_offset
time_bounds: TimeBounds = NATIVE.time_bounds if NATIVE is not None else py_time_bounds
find_record: FindRecord = NATIVE.find_record if NATIVE is not None else py_find_record
count_times: CountTimes = NATIVE.count_times if NATIVE is not None else py_count_times


def first_stamped(data: Buffer, header: BatchHeader, min_offset: int, timestamp: int) -> Record | None:
    """The first record of the batch ``data`` (its bytes, header included) whose offset
        is ≥ ``min_offset`` and timestamp ≥ ``timestamp``, or ``None``: what walking
        :func:`~logtrove.records.iter_records` finds (or raises), for time lookups. The batch
        is read by :func:`pick_window`, which decodes only the records from the hit on; a
        batch it refuses, or one whose timestamps alone rule a hit out (its records unchecked),
    is walked row by row as before."""
    append_ts = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
    try:
        payload = batch_payload(data, header)
        picked = pick_window(
            payload,
            header.base_offset,
            header.base_timestamp,
            append_ts,
            timestamp,
            None,
            min_offset,
            _INT64_MAX,
            1,  # the first hit only; the rest are checked, not decoded
        )
    except (ValueError, RecordsError):
        picked = None
    if picked is not None and picked[0] == header.record_count:  # every record checked
        return Record(*picked[1][0]) if picked[1] else None
    for record in iter_records(data, 0, header):
        if record.offset >= min_offset and record.timestamp >= timestamp:
            return record
    return None
