"""A segment's unindexed tail, summarised once for every lookup: its timestamps for range
scans, its keys, IDs and indexed headers for hash lookups.

A partition under steady produce has an unindexed tail (the records after the last
index block, up to a block's worth: tens of thousands of records, megabytes) that no
``.skip`` block covers, so a time-range scan read and framed all of it, every query,
even when the window is far in the past. :func:`tail_bounds` keeps, per segment and tail
start, the smallest and largest record timestamp of the tail read so far and extends it
with the batches appended since: a scan whose window misses them skips the covered tail
in one step, and each batch is read once per process instead of once per query.

The summary counts every record of the data batches (control batches hold no data;
LogAppendTime batches count their append time), so "no record of the covered range is
stamped in the window" holds whatever else the scan filters on. It stops growing at a
batch it cannot read (damaged, or compressed past the decompression limit): from there
the scan reads the log as before. Both summaries are kept per segment file (path,
inode), in pieces; the tail's start moves when the indexer writes a block, and that drops
only the pieces the block covers. A bounded LRU, and for the hash tables a byte budget,
drop the rest.

Hash lookups searched the whole tail for their needle on every query likewise; the
tail's keys, message IDs and indexed headers are now hashed in memory by the indexer's
own parser as it grows (:func:`tail_key_tables`, in pieces of a quarter MiB, each batch
parsed once, the newest piece's table remade when it grew), and only what was appended
since is searched. The candidates are checked against the records as the
index blocks' are.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from logtrove.records import BatchHeader, RecordsError
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE
from logtrove.records.pick import time_bounds
from logtrove.records.record import batch_payload
from logtrove.storage import Segment, TopicConfig
from logtrove.storage.derived.blockentries import Pending, new_pending

_ENTRIES = 256
_FIRST_CHUNK = 64 * 1024  # a scan's first read per range, growing 4× up to _CHUNK
_CHUNK = 1024 * 1024
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass
class _Tail:
    start: int  # the tail's start last asked for; the oldest piece may begin before it
    end: int  # positions up to ``end`` are summarised
    pieces: list[tuple[int, int, int]] = field(default_factory=list)  # (end, lo, hi), oldest first
    piece_start: int = 0  # the piece being summarised: [piece_start, end), stamped in [lo, hi]
    lo: int = _INT64_MAX
    hi: int = _INT64_MIN
    stuck: bool = False  # a batch at ``end`` could not be read: the summary stops there
    lock: threading.Lock = field(default_factory=threading.Lock)

    def restart(self, start: int) -> None:
        """Forget the summary: summarise again from ``start``."""
        self.start = self.end = self.piece_start = start
        self.pieces, self.lo, self.hi, self.stuck = [], _INT64_MAX, _INT64_MIN, False

    def move_start(self, start: int) -> None:
        """The indexer wrote a block: the tail now starts at ``start``. The pieces that end
        at or before it go; the one it falls in stays whole (its bounds, those of a few
        records more, still bound the rest)."""
        del self.pieces[: bisect.bisect_right(self.pieces, start, key=lambda piece: piece[0])]
        self.start = start

    def bounds(self) -> tuple[int, int]:
        """(lo, hi) over the kept pieces and the one being summarised."""
        return (
            min([self.lo, *(lo for _, lo, _ in self.pieces)]),
            max([self.hi, *(hi for _, _, hi in self.pieces)]),
        )


def append_time(header: BatchHeader) -> int | None:
    """Every record's timestamp in a LogAppendTime batch, else ``None``."""
    return header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None


_tails: OrderedDict[tuple[str, int], _Tail] = OrderedDict()
_tails_lock = threading.Lock()


def tail_bounds(seg: Segment, start: int, end: int) -> tuple[int, int, int]:
    """``(covered, lo, hi)``: every record of the data batches in ``[start, covered)`` of
    ``seg`` is stamped within ``[lo, hi]`` (``lo > hi`` when there is none), ``covered``
    ≤ ``end``; only batches not summarised before are read.

    The summary is kept per segment file in pieces of :data:`_CHUNK` bytes, each with its
    own bounds. When the indexer writes a block, the tail's start moves forward: the
    pieces the block covers go and the rest stay, so the tail is not read again. A start
    before the summary or past it summarises anew."""
    key = (str(seg.log_path), seg.inode)
    with _tails_lock:
        tail = _tails.get(key)
        if tail is None:
            tail = _tails[key] = _Tail(start, start, piece_start=start)
            while len(_tails) > _ENTRIES:
                _tails.popitem(last=False)
        else:
            _tails.move_to_end(key)
    with tail.lock:
        if not tail.start <= start <= tail.end:
            tail.restart(start)
        elif start > tail.start:
            tail.move_start(start)
        if tail.end < end and not tail.stuck:
            _summarise(tail, seg, end)
        return min(tail.end, end), *tail.bounds()


def _summarise(tail: _Tail, seg: Segment, end: int) -> None:
    """Add the whole batches of ``[tail.end, end)`` to the summary, closing a piece every
    :data:`_CHUNK` bytes."""
    position = tail.end
    for _, header, buf, rel in seg.spans(tail.end, end, first_read=_FIRST_CHUNK, max_read=_CHUNK):
        if not header.is_control:
            appended = append_time(header)
            try:
                if appended is not None:
                    lo = hi = appended
                else:
                    lo, hi = time_bounds(batch_payload(buf, header, rel), header.base_timestamp)
            except (ValueError, RecordsError):
                tail.stuck = True
                break
            tail.lo, tail.hi = min(tail.lo, lo), max(tail.hi, hi)
        position += header.size
        tail.end = position
        if position - tail.piece_start >= _CHUNK:
            tail.pieces.append((position, tail.lo, tail.hi))
            tail.piece_start, tail.lo, tail.hi = position, _INT64_MAX, _INT64_MIN


# -- keys, IDs and indexed headers of the tail -------------------------------------------------
_KEY_CHUNK = 256 * 1024  # tail bytes gathered before they are indexed in memory
_KEY_BYTES = 64 << 20  # the tables of all tails together


@dataclass
class _TailKeys:
    start: int  # the tail's start the tables were last asked for; the oldest may begin before
    end: int  # where the complete tables end, and ``pending`` begins
    tables: list[bytes] = field(default_factory=list)  # .keyidx tables, oldest first
    ends: list[int] = field(default_factory=list)  # the position each of ``tables`` ends at
    pending: Pending | None = None  # the piece being gathered: [end, pending_end)
    pending_end: int = 0
    partial: bytes | None = None  # the table of ``pending`` as it stands at ``pending_end``
    stuck: bool = False  # a batch at ``pending_end`` could not be parsed: the rest is scanned
    lock: threading.Lock = field(default_factory=threading.Lock)

    def restart(self, start: int) -> None:
        """Forget every table: gather again from ``start``."""
        self.start = self.end = self.pending_end = start
        self.tables, self.ends, self.pending, self.partial, self.stuck = [], [], None, None, False

    def move_start(self, start: int) -> None:
        """The indexer wrote a block: the tail now starts at ``start`` (within what the
        tables cover). The tables that end at or before it go; the one it falls in stays
        (the caller skips its offsets below the tail's), so what was gathered after the
        block is not parsed again."""
        drop = bisect.bisect_right(self.ends, start)
        del self.tables[:drop], self.ends[:drop]
        self.start = start


_keys: OrderedDict[tuple[str, int, tuple[str, ...]], _TailKeys] = OrderedDict()


def tail_key_tables(seg: Segment, start: int, end: int, config: TopicConfig) -> tuple[int, tuple[bytes, ...]]:
    """``(covered, tables)``: ``.keyidx`` hash tables (the layout of
    :mod:`logtrove.storage.derived.keyindex` after the names) of every key, message ID and
    indexed header of the data records in ``[start, covered)`` of ``seg``, oldest first,
    made by the indexer's own parser (:func:`~logtrove.storage.derived.blockentries.new_pending`).
    Each batch is parsed once, into the piece being gathered; a piece of
    :data:`_KEY_CHUNK` bytes becomes a table of its own, and the newest piece's table is
    made again only when batches were added to it since. Offsets in the tables are
    relative to the segment's base offset. ``[covered, end)`` is left to a scan: batches
    not yet whole, or from a batch the parser refused on.

    When the indexer writes a block, the tail's start moves forward into the tables: the
    oldest table left may then hold records before ``start`` too, which the caller skips
    by offset (they are the block's). Each segment file keeps one set of tables; a start
    before them or past them gathers anew. (A log is never cut in place under them: a
    truncation replaces the segment file, which is another inode.)"""
    names = (config.message_id_header, *config.indexed_headers)
    key = (str(seg.log_path), seg.inode, names)
    with _tails_lock:
        keys = _keys.get(key)
        if keys is None:
            keys = _keys[key] = _TailKeys(start, start, pending_end=start)
            while len(_keys) > _ENTRIES:
                _keys.popitem(last=False)
        else:
            _keys.move_to_end(key)
    with keys.lock:
        if not keys.start <= start <= keys.pending_end:
            keys.restart(start)
        elif start > keys.start:
            keys.move_start(start)
        if not keys.stuck and keys.pending_end < end:
            _gather(keys, seg, end, config)
            if keys.pending_end - keys.end >= _KEY_CHUNK and keys.pending is not None:
                keys.tables.append(keys.pending.key_table())
                keys.ends.append(keys.pending_end)
                keys.end, keys.pending, keys.partial = keys.pending_end, None, None
                _trim(key)
        if keys.pending is not None and keys.partial is None:
            keys.partial = keys.pending.key_table()
        tables = (*keys.tables, *([] if keys.partial is None else [keys.partial]))
        return min(keys.pending_end, end), tables


def _gather(keys: _TailKeys, seg: Segment, end: int, config: TopicConfig) -> None:
    """Parse the whole batches of ``[keys.pending_end, end)`` into the piece being gathered."""
    if keys.pending is None:
        indexed = {n.encode("utf-8"): b"h:" + n.encode("utf-8") + b":" for n in config.indexed_headers}
        keys.pending = new_pending(
            config.message_id_header.encode("utf-8"), config.message_tag_header.encode("utf-8"), indexed
        )
    position = keys.pending_end
    for _, header, buf, rel in seg.spans(position, end, first_read=_FIRST_CHUNK, max_read=_CHUNK):
        if not header.is_control:
            try:
                keys.pending.add(
                    batch_payload(buf, header, rel),
                    header.base_offset - seg.base_offset,
                    header.base_timestamp,
                    append_time(header),
                )
            except (ValueError, RecordsError):
                keys.stuck = True
                break
        position += header.size
    if position > keys.pending_end:
        keys.pending_end, keys.partial = position, None


def _trim(keep: tuple[str, int, tuple[str, ...]]) -> None:
    """Drop the least recently used tables past :data:`_KEY_BYTES` (not ``keep``'s): a
    tail's tables take about 45 bytes a record, and the indexer leaves old tails behind."""
    with _tails_lock:
        total = sum(len(t) for entry in _keys.values() for t in entry.tables)
        for old in list(_keys):
            if total <= _KEY_BYTES:
                break
            if old != keep:
                total -= sum(len(t) for t in _keys.pop(old).tables)
