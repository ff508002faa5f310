"""What a read_committed reader may show of a partition, derived from the log alone.

logtrove's own readers (query, HTTP, ``consume``, the Spark source, export) open the data
directory read-only and cannot ask the broker's transaction coordinator, so they derive
the outcome of every transaction from the log, as Kafka's consumer does from the markers:

* a **transactional data batch** of producer ``P`` belongs to ``P``'s transaction that
  began with ``P``'s first transactional batch after its previous marker and ends at
  ``P``'s next marker (a control batch whose one record's key is ``(version 0, type)``,
  0 = ABORT, 1 = COMMIT; see :mod:`logtrove.records.markers`);
* an ABORT marker hides that transaction's batches; a COMMIT shows them;
* a transaction without a marker yet is **open**: the last stable offset (LSO) is the
  first offset of the earliest open transaction (the log end when none is open), and a
  read_committed reader shows nothing at or past it, non-transactional data included
  (Kafka's Fetch stops there too);
* control batches are never shown.

A walk begins where the per-segment transaction files allow
(:func:`logtrove.storage.txnload.start_state`): the aborted transactions of the segments
below the newest usable snapshot come from their ``.txnindex``, and the batches of each
are found by reading the headers of its span ``[first, marker)`` only; the open ones at
the snapshot are carried. Without usable files the walk starts at the first segment.

The walk reads batch headers only (control batches whole, one record). Its state is kept
per partition directory (at most :data:`MAX_PARTITIONS`, least recently used dropped) and
continued from where it stopped, keyed by each walked segment's ``(base offset, size)``:
a repeated question walks only what was appended since; a segment that shrank or was
replaced (the cleaner, a truncation) restarts the walk of that partition. Memory: the
offset ranges of aborted batches (consecutive batches merged) and the open transactions'.

This module sits in storage (below ``txn``) so that the query engine can use it; the
broker's own state (:mod:`logtrove.txn.partition`) follows the same rules from appends.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from logtrove.records import HEADER_SIZE, BatchHeader, MarkerType, RecordsError, marker_type, read_header
from logtrove.records.batch import MIN_BATCH_LENGTH
from logtrove.storage.log import PartitionLog
from logtrove.storage.segment import Segment
from logtrove.storage.txnload import start_state

__all__ = ["MAX_PARTITIONS", "CommittedView", "committed_view"]

MAX_PARTITIONS = 1024


@dataclass(frozen=True, slots=True)
class CommittedView:
    """A snapshot of one partition for a read_committed reader: offsets at or past
    ``last_stable_offset`` and offsets in the sorted, disjoint ``[start, end]`` ranges of
    aborted batches are hidden."""

    last_stable_offset: int
    _starts: tuple[int, ...] = ()
    _ends: tuple[int, ...] = ()

    def aborted(self, offset: int) -> bool:
        """Whether ``offset`` lies in a batch of an aborted transaction."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return i >= 0 and offset <= self._ends[i]

    def visible(self, offset: int) -> bool:
        """Whether a data record at ``offset`` is committed (or not transactional) and
        below the LSO."""
        return offset < self.last_stable_offset and not self.aborted(offset)

    def aborted_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """The offsets of aborted batches in ``[start, end)``, as disjoint ``[first, stop)``
        spans in order (for counts that must leave them out)."""
        i = max(bisect.bisect_right(self._starts, start) - 1, 0)
        out = []
        for first, last in zip(self._starts[i:], self._ends[i:], strict=True):
            if first >= end:
                break
            lo, hi = max(first, start), min(last + 1, end)
            if lo < hi:
                out.append((lo, hi))
        return out

    def hides_batch(self, header: BatchHeader) -> bool:
        """Whether a whole batch is hidden: a control batch, one of an aborted
        transaction, or one at or past the LSO. A transactional batch belongs to one
        producer's one transaction, so the batch decides for all its records."""
        return (
            header.is_control
            or header.base_offset >= self.last_stable_offset
            or (header.is_transactional and self.aborted(header.base_offset))
        )


@dataclass
class _Walk:
    """The continued walk of one partition (see the module docstring)."""

    sizes: dict[int, int] = field(default_factory=dict)  # segment base → bytes walked
    segment: int = -1  # base of the segment the walk stopped in
    position: int = 0  # … and the position it stopped at
    end_offset: int = 0  # the offset after the last batch walked
    open: dict[int, list[list[int]]] = field(default_factory=dict)  # producer → its batch ranges
    carried: dict[int, int] = field(default_factory=dict)  # producer → first offset, open at walk_start
    walk_start: int = 0  # where the walk began: the files told what is below
    starts: list[int] = field(default_factory=list)  # aborted ranges, sorted by start
    ends: list[int] = field(default_factory=list)
    frozen: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # starts, ends as of the last view

    def fits(self, plog: PartitionLog) -> bool:
        """Whether the walk is still a prefix of the log: no walked segment shrank, and no
        segment appeared below where it stopped."""
        for seg in plog.segments:
            walked = self.sizes.get(seg.base_offset)
            if walked is None:
                if seg.base_offset < self.segment:
                    return False
            elif seg.size < walked or (walked != seg.size and seg.base_offset != self.segment):
                return False
        return True

    def advance(self, plog: PartitionLog) -> None:
        segments = plog.segments
        if self.segment < 0 and segments:
            self._start(segments)
        for seg in segments:
            if seg.base_offset < self.segment:
                continue
            pos = self.position if seg.base_offset == self.segment else 0
            for at, header in seg.batches(pos):
                self._on_batch(segments, header, seg.read(at, header.size) if header.is_control else b"")
                pos = at + header.size
                self.end_offset = header.next_offset
            self.segment, self.position = seg.base_offset, pos
            self.sizes[seg.base_offset] = pos

    def _start(self, segments: list[Segment]) -> None:
        """Begin at the newest snapshot the transaction files allow
        (:func:`logtrove.storage.txnload.start_state`): the aborted transactions below it
        come from the ``.txnindex`` files, their batches from a walk of their spans only."""
        start = start_state(segments, segments[-1].next_offset)
        for seg in segments[: start.index]:
            self.sizes[seg.base_offset] = seg.size
        if start.index < len(segments):
            first = segments[start.index]
            self.segment, self.position = first.base_offset, 0
            self.walk_start = self.end_offset = first.base_offset
        else:  # a snapshot at the log end: nothing to walk
            last = segments[-1]
            self.segment, self.position = last.base_offset, last.size
            self.walk_start = self.end_offset = last.next_offset
        self.carried = dict(start.open)
        self._add_spans(segments, [(a.producer_id, a.first_offset, a.last_offset) for a in start.aborted])

    def _on_batch(self, segments: list[Segment], header: BatchHeader, data: bytes) -> None:
        if header.producer_id < 0 or not header.is_transactional:
            return
        pid = header.producer_id
        if not header.is_control:
            ranges = self.open.setdefault(pid, [])
            if ranges and ranges[-1][1] + 1 == header.base_offset:
                ranges[-1][1] = header.last_offset
            else:
                ranges.append([header.base_offset, header.last_offset])
            return
        kind = marker_type(data, header)
        if kind is None:
            return
        ranges = self.open.pop(pid, [])
        carried = self.carried.pop(pid, None)
        if kind == MarkerType.ABORT and ranges:
            self._add_ranges(ranges)
        if kind == MarkerType.ABORT and carried is not None:
            self._add_spans(segments, [(pid, carried, self.walk_start)])

    def _add_spans(self, segments: list[Segment], spans: list[tuple[int, int, int]]) -> None:
        """Add the batches of each ``(producer, first, end)``: that producer's
        transactional data batches in ``[first, end)``, found by a walk of the headers of
        those offsets only."""
        by_producer: dict[int, tuple[list[int], list[int]]] = {}  # sorted firsts, their ends
        for pid, first, end in sorted(spans, key=lambda span: span[1]):
            firsts, ends = by_producer.setdefault(pid, ([], []))
            firsts.append(first)
            ends.append(end)
        ranges: list[list[int]] = []
        for lo, hi in _merged((first, end) for _, first, end in spans):
            for header in _headers(segments, lo, hi):
                owned = by_producer.get(header.producer_id)
                if not owned or header.is_control or not header.is_transactional:
                    continue
                i = bisect.bisect_right(owned[0], header.base_offset) - 1  # a producer's spans are disjoint
                if i >= 0 and header.base_offset < owned[1][i]:
                    if ranges and ranges[-1][1] + 1 == header.base_offset:
                        ranges[-1][1] = header.last_offset
                    else:
                        ranges.append([header.base_offset, header.last_offset])
        self._add_ranges(ranges)

    def _add_ranges(self, ranges: list[list[int]]) -> None:
        if not ranges:
            return
        self.frozen = None
        for start, end in ranges:
            i = bisect.bisect_left(self.starts, start)
            self.starts.insert(i, start)
            self.ends.insert(i, end)

    def view(self, plog: PartitionLog) -> CommittedView:
        firsts = [ranges[0][0] for ranges in self.open.values() if ranges]
        lso = min([*firsts, *self.carried.values()], default=max(self.end_offset, plog.log_start_offset))
        if self.frozen is None:  # copied only when an abort changed them, not per question
            self.frozen = (tuple(self.starts), tuple(self.ends))
        return CommittedView(lso, *self.frozen)


def _merged(spans: Iterator[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of ``[first, end)`` spans, as disjoint sorted spans."""
    out: list[tuple[int, int]] = []
    for first, end in sorted(spans):
        if out and first <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((first, end))
    return out


def _headers(segments: list[Segment], lo: int, hi: int) -> Iterator[BatchHeader]:
    """The headers of the batches beginning in ``[lo, hi)``, from the offset-index entry
    below ``lo``: one small read per header for a short span (a chunked read would carry
    the data between the headers too), the chunked walk of :meth:`Segment.batches` for a
    long one (fewer reads where most bytes are wanted anyway)."""
    for seg in segments:
        if seg.next_offset <= lo or seg.base_offset >= hi:
            continue
        position = seg.offset_index.lookup(lo)[1] if seg.base_offset < lo else 0
        walk = seg.batches(position) if hi - lo > _LONG_SPAN else _header_reads(seg, position)
        for _, header in walk:
            if header.base_offset >= hi:
                return
            if header.base_offset >= lo:
                yield header


_LONG_SPAN = 256  # offsets


def _header_reads(seg: Segment, position: int) -> Iterator[tuple[int, BatchHeader]]:
    """:meth:`Segment.batches` reading only each header."""
    while position + HEADER_SIZE <= seg.size:
        try:
            header = read_header(seg.read(position, HEADER_SIZE), 0)
        except RecordsError:
            return
        if header.batch_length < MIN_BATCH_LENGTH or position + header.size > seg.size:
            return
        yield position, header
        position += header.size


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    walk: _Walk = field(default_factory=_Walk)


class _Cache:
    """The walks by partition directory, least recently used dropped past
    :data:`MAX_PARTITIONS`. One lock per partition: a long first walk of one partition
    does not hold readers of others."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def view(self, plog: PartitionLog) -> CommittedView:
        key = str(plog.directory)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
            self._entries.move_to_end(key)
            while len(self._entries) > MAX_PARTITIONS:
                self._entries.popitem(last=False)
        with entry.lock:
            if not entry.walk.fits(plog):
                entry.walk = _Walk()
            try:
                entry.walk.advance(plog)
            except BaseException:
                entry.walk = _Walk()  # half a segment walked: the next question starts afresh
                raise
            return entry.walk.view(plog)


_CACHE = _Cache()


def committed_view(plog: PartitionLog) -> CommittedView:
    """The partition as a read_committed reader sees it now (walking only what was
    appended since the last call for this partition directory)."""
    return _CACHE.view(plog)
