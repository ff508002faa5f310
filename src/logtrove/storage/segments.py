"""The ordered segment list of one partition's log, and the lookups by offset and time
over it (Kafka's ``LogSegments``).

::

    bases      [    0    ,   120   ,   377   ,   502   ]   strictly increasing
    segments   [ seg 0   │ seg 1   │ seg 2   │ active  ]   oldest first; appends go last
                             ▲
           floor(200) ───────┘   the segment with the greatest base ≤ 200

Invariants: ``bases[i] == segments[i].base_offset`` for every ``i``, the bases strictly
increase, and the last segment is the active one (the only one written to). A
:class:`LogSegments` is changed only under the lock of the
:class:`~logtrove.storage.locallog.LocalLog` that owns it; readers take a snapshot (a
copy of ``segments``) under that lock and look up in the copy without it.

The lookups (:func:`locate`, :func:`offset_for_timestamp`, :func:`max_timestamp_offset`)
take such a snapshot and the log start offset: offsets below the log start are
invisible, although the batch holding the log start may still hold earlier records.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from logtrove.records import BatchHeader, iter_records
from logtrove.records.pick import first_stamped
from logtrove.storage.segment import Segment


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """The answer to a by-time lookup: an offset and that record's timestamp."""

    offset: int
    timestamp: int


class LogSegments:
    """A partition's segments in offset order, with their base offsets beside them for
    bisection (module doc: invariants)."""

    __slots__ = ("bases", "segments")

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.bases: list[int] = []

    @property
    def active(self) -> Segment:
        """The last segment, the one appends go to (the list is never empty then)."""
        return self.segments[-1]

    def add(self, seg: Segment) -> None:
        """Append ``seg``: its base must be above every base listed, or :meth:`sort`
        must follow."""
        self.segments.append(seg)
        self.bases.append(seg.base_offset)

    def remove(self, seg: Segment) -> None:
        i = self.segments.index(seg)
        del self.segments[i]
        del self.bases[i]

    def pop_last(self) -> Segment:
        self.bases.pop()
        return self.segments.pop()

    def clear(self) -> None:
        self.segments.clear()
        self.bases.clear()

    def sort(self) -> None:
        """Put the segments back in offset order (after a read-only view's refresh
        added segments found in a directory listing)."""
        self.segments.sort(key=lambda s: s.base_offset)
        self.bases[:] = [s.base_offset for s in self.segments]

    def floor(self, offset: int) -> Segment:
        """The segment with the greatest base ≤ ``offset``; the first one when ``offset``
        is below every base."""
        i = bisect.bisect_right(self.bases, offset) - 1
        return self.segments[max(i, 0)]

    def sealed_run(self, run: list[Segment]) -> int | None:
        """Where ``run`` sits in the list as consecutive sealed segments (the active
        segment not among them): its index, or ``None`` when the list no longer holds
        it so (a segment deleted or replaced since the run was taken)."""
        if run[0] not in self.segments:
            return None
        first = self.segments.index(run[0])
        if self.segments[first : first + len(run)] != run or run[-1] is self.active:
            return None
        return first

    def replace_run(self, first: int, count: int, new: Segment) -> None:
        """Put ``new`` in place of the ``count`` segments from index ``first`` (the
        cleaner's swap: ``new`` has the base of the first one replaced)."""
        del self.segments[first : first + count]
        del self.bases[first : first + count]
        self.segments.insert(first, new)
        self.bases.insert(first, new.base_offset)


def locate(segments: list[Segment], offset: int) -> tuple[Segment, int, BatchHeader] | None:
    """The segment, byte position and header of the batch of ``segments`` (a snapshot)
    holding ``offset``, or of the next surviving batch (the cleaner leaves offset gaps);
    ``None`` past the last batch."""
    i = max(bisect.bisect_right([s.base_offset for s in segments], offset) - 1, 0)
    for seg in segments[i:]:
        found = seg.find(offset)
        if found is not None:
            return seg, found[0], found[1]
    return None


def offset_for_timestamp(segments: list[Segment], start: int, timestamp: int) -> TimestampOffset | None:
    """The first record (in offset order, from the log start offset ``start``) whose
    timestamp is ≥ ``timestamp``; ``None`` if there is none."""
    for seg in segments:
        if seg.max_timestamp < timestamp or seg.next_offset <= start:
            continue
        found = seg.find_timestamp(timestamp, start)
        while found is not None:
            position, header = found
            record = first_stamped(seg.read(position, header.size), header, start, timestamp)
            if record is not None:
                return TimestampOffset(record.offset, record.timestamp)
            found = seg.find_timestamp(timestamp, header.next_offset)
    return None


def max_timestamp_offset(segments: list[Segment], start: int) -> TimestampOffset | None:
    """The first record carrying the largest timestamp of the visible log (ListOffsets
    -3); records below the log start offset ``start`` do not count."""
    best = -1
    for seg in segments:
        if seg.next_offset <= start:
            continue
        if seg.base_offset >= start or seg.max_timestamp_offset >= start:
            best = max(best, seg.max_timestamp)  # the batch reaching it is visible
        else:
            best = max(best, _max_timestamp_from(seg, start))
    return offset_for_timestamp(segments, start, best) if best >= 0 else None


def _max_timestamp_from(seg: Segment, start: int) -> int:
    """Largest timestamp of the records of ``seg`` at offsets ≥ ``start`` (a walk of
    batch headers; only the batch holding ``start`` is decoded)."""
    found = seg.find(start)
    best = -1
    for position, header in seg.batches(found[0]) if found else ():
        if header.base_offset >= start:
            best = max(best, header.max_timestamp)
            continue
        for record in iter_records(seg.read(position, header.size), 0, header):
            if record.offset >= start:
                best = max(best, record.timestamp)
    return best
