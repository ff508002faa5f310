"""The per-record work of the cleaner's two passes, over one batch's records section.

:func:`map_records` (the map pass) records each keyed record's offset in an
:class:`~.offset_map.OffsetMap` table; :func:`filter_records` (the copy pass) decides per
record whether it stays and re-encodes the survivors. Neither builds ``Record`` objects:
they read the fields they need from the payload (the decompressed records section, see
:mod:`logtrove.records.record`) and copy the rest::

    record: │ length │ attributes │ timestampDelta │ offsetDelta │ keyLength key valueLength value headers │
            └ decoded, re-encoded on a rebuild ────────────────────┴ the "tail": copied byte for byte ─────┘

A rebuilt record has attributes 0, its timestamp delta relative to the rebuilt batch's
base timestamp, its offset delta unchanged and its tail as it was: for canonically
encoded records (every Kafka client's) these are the bytes ``build_batch`` would give.

Two implementations give the same tables, bytes and errors:

* ``logtrove.storage.cleaner._passes``, compiled from ``_passes.c`` when the package is
  installed with a C compiler and xxHash's header (about 0.1-0.3 us a record);
* :func:`py_map_records` / :func:`py_filter_records`, pure Python, which define the
  behaviour (5-20 us a record).

The compiled one is used as :mod:`logtrove.native` says (unless it is missing, an older
build, or the environment sets ``LOGTROVE_PURE_PYTHON=1``); :data:`IMPLEMENTATION` says
which one runs. A malformed
payload raises :class:`ValueError` from either (the cleaner reports it as a
:class:`~logtrove.records.CorruptRecordError`).

Both read the two table layouts of :mod:`.offset_map` (digest = xxh3-128 of the key):
``HASHED`` — :class:`~.offset_map.OffsetMap`'s open-addressing slots of
``digest 16 B | offset + 1 u64``, probed linearly from ``digest[:8] % slots``;
``SORTED`` — :class:`~.offset_map.OffsetMapFile`'s file, a 24-byte header then
``digest 16 B | offset i64`` entries sorted by digest.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from typing import NamedTuple

import xxhash

from logtrove.native import compiled, implementation
from logtrove.records.batch import Buffer
from logtrove.records.varint import varint_below as _read_varint

HASHED = 0
SORTED = 1
SLOT = 24
DIGEST = 16
_MAX_OFFSET_DELTA = 2**31 - 1
_U64 = 2**64 - 1

Table = bytes | bytearray | memoryview | mmap.mmap
"""A map table in either layout (an :class:`~.offset_map.OffsetMapFile` is an ``mmap``)."""


class Filtered(NamedTuple):
    """What :func:`filter_records` decided for one batch.

    ``kept == 0``: drop the batch. ``records is None`` (and ``kept > 0``): copy the batch
    as it is. Otherwise rebuild it from ``records`` with ``base_ts``, ``max_ts`` and the
    delete ``horizon`` (``None``: no horizon attribute); ``base_ts``, ``max_ts`` are 0 and
    ``horizon`` is ``None`` when there is nothing to rebuild.
    """

    records: bytes | None
    read: int
    kept: int
    tombstones_removed: int
    live: int
    base_ts: int
    max_ts: int
    horizon: int | None


MapRecords = Callable[[bytearray, int, int, Buffer, int, int, int, int], tuple[int, int | None]]
FilterRecords = Callable[
    [Table, int, Buffer, int, int, int, int | None, int | None, int, int, int],
    tuple[bytes | None, int, int, int, int, int, int, int | None],
]


# -- the pure-Python twin ---------------------------------------------------------------


def py_map_records(
    table: bytearray,
    capacity: int,
    size: int,
    payload: Buffer,
    base_offset: int,
    record_count: int,
    first_dirty: int,
    limit: int,
) -> tuple[int, int | None]:
    """Record, in the ``HASHED`` ``table`` holding ``size`` keys, the offset of each
    record with a key and an offset in ``[first_dirty, limit)``; return
    ``(size, full_at)``.

    Walking stops at the first offset ``>= limit`` (the rest of the batch is beyond the
    round), or at the first new key when ``size`` has reached ``capacity``: its offset is
    ``full_at`` (``None`` when every record fitted) and the table is unchanged for it.
    """
    if len(table) < 4 * SLOT:
        raise ValueError("the offset map table is too small")
    slots = len(table) // SLOT
    declared = max(record_count, 0)
    b = memoryview(payload)
    n = len(b)
    p = count = 0
    while p < n:
        if count == declared:
            raise _too_many(declared)
        record, p = _parse_record(b, n, p, count)
        offset = base_offset + record.off_delta
        if offset >= limit:
            return size, None
        count += 1
        if offset < first_dirty or record.key is None:
            continue
        digest = xxhash.xxh3_128_digest(record.key)
        slot, stored = _probe(table, slots, digest)
        if stored == 0:
            if size >= capacity:
                return size, offset
            size += 1
        pos = slot * SLOT
        table[pos : pos + DIGEST] = digest
        table[pos + DIGEST : pos + SLOT] = (offset + 1).to_bytes(8, "big")
    if count != declared:
        raise _too_few(declared, count)
    return size, None


def py_filter_records(
    table: Table,
    layout: int,
    payload: Buffer,
    base_offset: int,
    record_count: int,
    base_ts: int,
    append_ts: int | None,
    batch_horizon: int | None,
    now: int,
    new_horizon: int,
    end: int,
) -> tuple[bytes | None, int, int, int, int, int, int, int | None]:
    """Keep or drop each record of a batch; the fields of :class:`Filtered`.

    A record stays when its offset is ``>= end`` (beyond the map), or when it has a key,
    ``table`` holds no later offset for that key, and it is not a tombstone of a batch
    whose ``batch_horizon`` is ``<= now``. Survivors below ``end`` that are tombstones
    give a batch without a horizon the horizon ``new_horizon``. Record timestamps are
    ``base_ts + delta``, or ``append_ts`` for a LogAppendTime batch; the rebuilt batch's
    base timestamp is its horizon, or else its first record's timestamp.
    """
    if layout not in (HASHED, SORTED) or len(table) < (4 * SLOT if layout == HASHED else SLOT):
        raise ValueError("not an offset map table of that layout")
    declared = max(record_count, 0)
    b = memoryview(payload)
    n = len(b)
    keep: list[tuple[_Record, int]] = []
    p = read = tombstones_removed = live = 0
    needs_horizon = False
    while p < n:
        if read == declared:
            raise _too_many(declared)
        record, p = _parse_record(b, n, p, read)
        read += 1
        offset = base_offset + record.off_delta
        kept = True
        if offset < end:
            if record.key is None:
                kept = False
            else:
                newest = _latest(table, layout, xxhash.xxh3_128_digest(record.key))
                if newest is not None and newest > offset:
                    kept = False
                elif record.tombstone and batch_horizon is not None and batch_horizon <= now:
                    kept = False
                    tombstones_removed += 1
            if kept:
                live += not record.tombstone
                needs_horizon |= record.tombstone
        if kept:
            keep.append((record, append_ts if append_ts is not None else _i64(base_ts + record.ts_delta)))
    if read != declared:
        raise _too_few(declared, read)
    has_horizon = batch_horizon is not None or needs_horizon
    if not keep or (len(keep) == read and has_horizon == (batch_horizon is not None)):
        return None, read, len(keep), tombstones_removed, live, 0, 0, None
    horizon = batch_horizon if batch_horizon is not None else new_horizon
    new_base = horizon if has_horizon else keep[0][1]
    out = bytearray()
    for record, ts in keep:
        body = (
            b"\x00" + _varint(_i64(ts - new_base)) + _varint(record.off_delta) + b[record.tail : record.end]
        )
        out += _varint(len(body))
        out += body
    return (
        bytes(out),
        read,
        len(keep),
        tombstones_removed,
        live,
        new_base,
        max(ts for _, ts in keep),
        horizon if has_horizon else None,
    )


class _Record(NamedTuple):
    tail: int  # position of keyLength: copied from here to ``end``
    end: int
    ts_delta: int
    off_delta: int
    key: bytes | None
    tombstone: bool


def _parse_record(b: memoryview, n: int, p: int, index: int) -> tuple[_Record, int]:
    length, p = _read_varint(b, n, p)
    if length is None or length < 0 or length > n - p:
        raise _malformed(index, "its length runs past the records")
    end = p + length
    if p >= end:
        raise _malformed(index, "it is empty")
    ts_delta, q = _read_varint(b, end, p + 1)
    if ts_delta is None:
        raise _malformed(index, "truncated timestamp delta")
    off_delta, q = _read_varint(b, end, q)
    if off_delta is None:
        raise _malformed(index, "truncated offset delta")
    if not 0 <= off_delta <= _MAX_OFFSET_DELTA:
        raise _malformed(index, "its offset delta is out of range")
    tail = q
    key_len, q = _read_varint(b, end, q)
    if key_len is None or key_len > end - q:
        raise _malformed(index, "truncated key")
    key = None
    if key_len >= 0:
        key = bytes(b[q : q + key_len])
        q += key_len
    value_len, q = _read_varint(b, end, q)
    if value_len is None or value_len > end - q:
        raise _malformed(index, "truncated value")
    return _Record(tail, end, ts_delta, off_delta, key, value_len < 0), end


def _probe(table: Table, slots: int, digest: bytes) -> tuple[int, int]:
    """(slot, stored offset + 1) where ``digest`` is or would go (0: an empty slot)."""
    slot = int.from_bytes(digest[:8], "big") % slots
    for _ in range(slots):
        pos = slot * SLOT
        stored = int.from_bytes(table[pos + DIGEST : pos + SLOT], "big")
        if stored == 0 or table[pos : pos + DIGEST] == digest:
            return slot, stored
        slot = slot + 1 if slot + 1 < slots else 0
    raise ValueError("the offset map table has no free slot")


def _latest(table: Table, layout: int, digest: bytes) -> int | None:
    if layout == HASHED:
        _, stored = _probe(table, len(table) // SLOT, digest)
        return stored - 1 if stored else None
    lo, hi = 0, (len(table) - SLOT) // SLOT
    while lo < hi:
        mid = (lo + hi) // 2
        pos = SLOT + mid * SLOT
        probe = bytes(table[pos : pos + DIGEST])
        if probe < digest:
            lo = mid + 1
        elif probe > digest:
            hi = mid
        else:
            return int.from_bytes(table[pos + DIGEST : pos + SLOT], "big", signed=True)
    return None


def _varint(value: int) -> bytes:
    n = ((value << 1) ^ (value >> 63)) & _U64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _i64(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer, as the C twin's arithmetic does."""
    return ((value + 2**63) & _U64) - 2**63


def _malformed(record: int, what: str) -> ValueError:
    return ValueError(f"record {record} of the batch is malformed: {what}")


def _too_many(declared: int) -> ValueError:
    return ValueError(f"the batch holds more than its {declared} declared records")


def _too_few(declared: int, held: int) -> ValueError:
    return ValueError(f"the batch declares {declared} records, holds {held}")


# -- choosing one ----------------------------------------------------------------------------


NATIVE = compiled("logtrove.storage.cleaner._passes")
IMPLEMENTATION = implementation(NATIVE)
map_records: MapRecords = NATIVE.map_records if NATIVE is not None else py_map_records
_filter: FilterRecords = NATIVE.filter_records if NATIVE is not None else py_filter_records


def filter_records(
    table: Table,
    layout: int,
    payload: Buffer,
    base_offset: int,
    record_count: int,
    base_ts: int,
    append_ts: int | None,
    batch_horizon: int | None,
    now: int,
    new_horizon: int,
    end: int,
) -> Filtered:
    """:func:`py_filter_records` by the implementation in use, as a :class:`Filtered`."""
    return Filtered._make(
        _filter(
            table,
            layout,
            payload,
            base_offset,
            record_count,
            base_ts,
            append_ts,
            batch_horizon,
            now,
            new_horizon,
            end,
        )
    )
