"""Per-segment transaction files: the aborted-transaction index and producer snapshots.

Both are derived files of a segment (same base-offset prefix, see
:meth:`Segment.derived_files`): they are renamed, swapped and deleted with it, so
retention, DeleteRecords and the cleaner's swap carry them along. Both can be rebuilt from
the log (:mod:`logtrove.storage.txnload`); a file that fails its checks is rebuilt, never
trusted and never a reason to refuse a start.

``00000000000000001234.txnindex`` — one entry per ABORT marker of this segment (Kafka's
``.txnindex``, same layout), in marker order::

    ┌─────────────┬─────────────────┬──────────────────┬─────────────────┬──────────────────────┐
    │ version i16 │ producer_id i64 │ first_offset i64 │ last_offset i64 │ last_stable_off. i64 │
    │ = 0         │                 │ its first batch  │ the ABORT marker│ LSO after the abort  │
    └─────────────┴─────────────────┴──────────────────┴─────────────────┴──────────────────────┘
    34 bytes an entry, no header; the file's size is a multiple of 34

Invariant: an entry ``(P, F, L, S)`` means the transaction of producer ``P`` whose first
batch in this partition is at ``F`` was aborted by the marker at ``L`` (in this segment,
``F ≤ L``), and when that marker was written every offset below ``S`` was decided
(``S ≤ L + 1``); entries' ``L`` strictly increase. Data of the transaction lies in
``[F, L)``, interleaved with other producers' batches. A marker of a producer with nothing
open (written again after a crash) has no entry.

``00000000000000001234.snapshot`` — the open transactions at offset 1234, the segment's
base, written when the segment is started (Kafka's producer-state snapshot, reduced to
what the last stable offset needs)::

    ┌────────────┬─────────────┬───────────┬─────────────┬──────────────┬───────────────────────┐
    │ magic      │ version i16 │ crc32 u32 │ offset i64  │ count i32    │ count × entry:        │
    │ "LTTS"     │ = 0         │ of what   │ = the base  │              │ producer_id i64,      │
    │            │             │ follows   │             │              │ first_offset i64      │
    └────────────┴─────────────┴───────────┴─────────────┴──────────────┴───────────────────────┘

Invariant: each entry is a producer whose transaction was open at ``offset`` (its first
batch at ``first_offset < offset``, no marker below ``offset`` after it); producer IDs are
unique. Idempotent producers' sequence numbers are not kept here: the broker recovers
them from the last offsets of the log (``broker/produce.py``), a bounded read.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from logtrove.records.batch import MIN_BATCH_LENGTH
from logtrove.storage.checkpoint import atomic_write
from logtrove.storage.segment import Segment
from logtrove.storage.segmentnames import segment_file_name

TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
TXN_INDEX_VERSION = 0
SNAPSHOT_VERSION = 0
MAX_SNAPSHOT_PRODUCERS = 1_000_000  # a snapshot claiming more is not read (16 MiB of entries)

_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, LSO
_SNAP_HEAD = struct.Struct(">4shI")  # magic, version, crc32 of the rest
_SNAP_BODY = struct.Struct(">qi")  # offset, count
_SNAP_ENTRY = struct.Struct(">qq")  # producer id, first offset
_MAGIC = b"LTTS"


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction of a partition: its data is in ``[first_offset, last_offset)``
    (interleaved with others' data), its ABORT marker at ``last_offset``, and every offset
    below ``last_stable_offset`` was decided once the marker was written (an annotation
    left out of comparisons: the transaction is the first three)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int = field(default=-1, compare=False)


def txn_index_path(seg: Segment) -> Path:
    """The ``.txnindex`` of ``seg``, with the segment's current file suffix."""
    return seg.directory / (segment_file_name(seg.base_offset, TXN_INDEX_SUFFIX) + seg.file_suffix)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / segment_file_name(offset, SNAPSHOT_SUFFIX)


# -- the aborted-transaction index ----------------------------------------------------
def encode_entries(entries: list[AbortedTxn]) -> bytes:
    return b"".join(
        _ENTRY.pack(TXN_INDEX_VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
        for e in entries
    )


def read_txn_index(seg: Segment) -> list[AbortedTxn] | None:
    """The entries of ``seg``'s ``.txnindex``, or ``None`` when it is missing or breaks the
    invariant (then it must be rebuilt). A file larger than the segment could need (one
    entry per smallest possible batch) is not read."""
    path = txn_index_path(seg)
    limit = (seg.size // MIN_BATCH_LENGTH + 1) * _ENTRY.size
    try:
        with path.open("rb") as f:
            if os.fstat(f.fileno()).st_size > limit:
                return None
            data = f.read(limit + 1)
    except OSError:
        return None
    if len(data) % _ENTRY.size:
        return None
    entries: list[AbortedTxn] = []
    previous = seg.base_offset - 1
    for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
        if (
            version != TXN_INDEX_VERSION
            or pid < 0
            or not 0 <= first <= last
            or not previous < last < seg.next_offset
            or lso > last + 1
        ):
            return None
        previous = last
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


def write_txn_index(seg: Segment, entries: list[AbortedTxn], *, sync: bool = False) -> None:
    """Replace ``seg``'s ``.txnindex`` by ``entries`` (atomically for readers)."""
    atomic_write(txn_index_path(seg), encode_entries(entries), sync=sync)


def append_txn_index(seg: Segment, entry: AbortedTxn) -> None:
    """Add one entry at the end of ``seg``'s ``.txnindex`` (one ``write``); a failure
    removes the file, so that it is rebuilt rather than trusted while it misses an entry."""
    try:
        fd = os.open(txn_index_path(seg), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            data = encode_entries([entry])
            if os.write(fd, data) != len(data):
                raise OSError(f"short write to {txn_index_path(seg).name}")
        finally:
            os.close(fd)
    except OSError:
        with contextlib.suppress(OSError):
            txn_index_path(seg).unlink(missing_ok=True)
        raise


# -- producer snapshots ---------------------------------------------------------------
def encode_snapshot(offset: int, open_txns: Mapping[int, int]) -> bytes:
    body = _SNAP_BODY.pack(offset, len(open_txns)) + b"".join(
        _SNAP_ENTRY.pack(pid, first) for pid, first in sorted(open_txns.items())
    )
    return _SNAP_HEAD.pack(_MAGIC, SNAPSHOT_VERSION, zlib.crc32(body)) + body


def write_snapshot(directory: Path, offset: int, open_txns: Mapping[int, int], *, sync: bool = False) -> None:
    """Write the snapshot of the open transactions at ``offset`` (a segment base)."""
    atomic_write(snapshot_path(directory, offset), encode_snapshot(offset, open_txns), sync=sync)


def read_snapshot(directory: Path, offset: int) -> dict[int, int] | None:
    """The open transactions (producer ID → first offset) of the snapshot at ``offset``,
    or ``None`` when it is missing or fails a check (magic, version, CRC, size, the
    offset it names, first offsets below it, unique producers)."""
    limit = _SNAP_HEAD.size + _SNAP_BODY.size + MAX_SNAPSHOT_PRODUCERS * _SNAP_ENTRY.size
    try:
        with snapshot_path(directory, offset).open("rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit or len(data) < _SNAP_HEAD.size + _SNAP_BODY.size:
        return None
    magic, version, crc = _SNAP_HEAD.unpack_from(data, 0)
    body = memoryview(data)[_SNAP_HEAD.size :]
    if magic != _MAGIC or version != SNAPSHOT_VERSION or zlib.crc32(body) != crc:
        return None
    at, count = _SNAP_BODY.unpack_from(body, 0)
    entries = body[_SNAP_BODY.size :]
    if at != offset or count < 0 or len(entries) != count * _SNAP_ENTRY.size:
        return None
    open_txns: dict[int, int] = {}
    for pid, first in _SNAP_ENTRY.iter_unpack(entries):
        if pid < 0 or not 0 <= first < offset or pid in open_txns:
            return None
        open_txns[pid] = first
    return open_txns
