"""Records over time for a topic's whole retention, counted by the records' own timestamps.

A histogram is a list of time edges ``E0 < E1 < … < En``; bucket ``i`` counts the data
records at or past the log start offset whose timestamp ``t`` has ``E[i] ≤ t < E[i+1]``
(a LogAppendTime batch's records all carry its append time). That is exactly what a
time-range search of ``[E[i], E[i+1])`` returns, in any order of timestamps: a late
record is counted where its own timestamp puts it, not where its offset is.

How, without decoding keys and values, from the coarsest summary that settles a part of
the log to the finest:

1. segments whose newest record (``max_timestamp``) is before ``E0``, or that hold no
   visible record, are passed over;
2. ``.skip`` blocks (:mod:`logtrove.storage.derived.skipindex`) keep each block's record
   count and smallest and largest record timestamp: a block whose ``[min, max]`` misses
   the range is passed over, one within a single bucket is counted whole from its count;
   the segment's unindexed tail has the same bounds from
   :func:`~logtrove.query.tail.tail_bounds` (no count: its batches are walked);
3. in a block (or tail) that straddles an edge, each batch header gives the batch's
   record count and largest timestamp; the block's smallest timestamp bounds the batch's
   from below (the batch's ``baseTimestamp`` does not: it is the first record's, and a
   later record may be older). A batch whose ``[block min, batch max]`` lies within one
   bucket is counted whole;
4. only the other batches are read, and then only each record's length, timestamp delta
   and offset delta (:func:`~logtrove.records.pick.count_times`, compiled). A batch it
   refuses is read row by row as the range search reads it (up to the first damaged
   record).
5. the smallest record timestamp of each batch read is kept per segment file (path,
   inode; :data:`_LOW_SEGMENTS` files, :data:`_LOWS_PER_SEGMENT` batches each), so
   the next histogram counts that batch whole from its header when ``[its smallest,
   its largest]`` lies within one of its buckets: with timestamps in order, a repeated
   or zoomed histogram reads only the batches that straddle its edges.

With timestamps in order, a block straddles at most the edges its time span crosses, so
the work is the batches near the edges; with timestamps out of order it is the batches
whose records span an edge, at worst every batch of the range (framing them costs a few
nanoseconds a record, plus decompression). The answer says, per bucket, how many records
were counted from record timestamps (``decoded``) and how many from summaries and
headers. A deadline, checked at every block and every :data:`_CHECK_EVERY` batches,
bounds the work: past it the histogram raises :class:`HistogramTimeoutError` rather than
returning counts that are not exact.

What is counted: data records (control batches, the transaction markers, are not), of
committed and aborted transactions alike (a read_uncommitted reader's view; a
read_committed search of a range holding an aborted transaction returns fewer). A
batch that cannot be decompressed is skipped, as the range search skips it.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from logtrove.query.errors import InvalidQueryError, QueryError
from logtrove.query.tail import append_time, tail_bounds
from logtrove.records import BatchHeader, RecordsError, iter_records
from logtrove.records.pick import count_times, time_bounds
from logtrove.records.record import batch_payload, timestamp_bounds
from logtrove.storage import PartitionLog, Segment
from logtrove.storage.derived.views import index_view

_log = logging.getLogger(__name__)

_CHECK_EVERY = 256
"""Batches walked between two looks at the deadline."""

_LOW_SEGMENTS = 256
"""Segment files whose batches' smallest timestamps are kept (least recently used go)."""
_LOWS_PER_SEGMENT = 1 << 18
"""Most batches kept per segment file."""


class _BatchKey(NamedTuple):
    """A batch, as a segment file holds it: a file truncated and written again does not
    give another batch's bound (its CRC covers its records)."""

    position: int
    base_offset: int
    crc: int


_lows: OrderedDict[tuple[str, int], dict[_BatchKey, int]] = OrderedDict()
_lows_lock = threading.Lock()


def _batch_lows(seg: Segment) -> dict[_BatchKey, int]:
    """The smallest record timestamp of each batch of ``seg`` read so far, kept per
    segment file (path, inode): a batch read for one histogram is counted whole from its
    header by the next, when its bounds lie within one bucket."""
    key = (str(seg.log_path), seg.inode)
    with _lows_lock:
        found = _lows.get(key)
        if found is None:
            found = _lows[key] = {}
            while len(_lows) > _LOW_SEGMENTS:
                _lows.popitem(last=False)
        else:
            _lows.move_to_end(key)
        return found


MAX_BUCKETS = 2000
"""Most buckets one histogram may have: each edge costs a lookup per partition."""

UNITS: dict[str, int] = {
    "second": 1_000,
    "10 seconds": 10_000,
    "minute": 60_000,
    "5 minutes": 300_000,
    "15 minutes": 900_000,
    "hour": 3_600_000,
    "3 hours": 10_800_000,
    "6 hours": 21_600_000,
    "12 hours": 43_200_000,
    "day": 86_400_000,
    "week": 604_800_000,
    "30 days": 2_592_000_000,
}
"""Bucket widths, smallest first; :func:`pick_bucket` takes the first that fits."""


class HistogramTimeoutError(QueryError):
    """The histogram did not finish within its time limit (a slow disk, a huge topic)."""


@dataclass(frozen=True, slots=True)
class PartitionCounts:
    """One partition's records per bucket, and how many of them were counted from record
    timestamps (the rest from index summaries and batch headers)."""

    partition: int
    counts: tuple[int, ...]
    decoded: tuple[int, ...]
    size_bytes: int

    @property
    def records(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True, slots=True)
class Histogram:
    """Records per bucket ``[edges[i], edges[i+1])`` summed over ``partitions``."""

    edges: tuple[int, ...]
    partitions: tuple[PartitionCounts, ...]
    blocks_counted: int  # index blocks (or unindexed tails) settled by their summary alone
    batches_counted: int  # batches counted whole from their header and a summary's bound
    batches_scanned: int  # batches whose record timestamps were read

    @property
    def counts(self) -> tuple[int, ...]:
        return _column_sums([p.counts for p in self.partitions], len(self.edges) - 1)

    @property
    def decoded(self) -> tuple[int, ...]:
        """Per bucket, the records counted from their own timestamps."""
        return _column_sums([p.decoded for p in self.partitions], len(self.edges) - 1)


def _column_sums(rows: list[tuple[int, ...]], n: int) -> tuple[int, ...]:
    return tuple(sum(col) for col in zip(*rows, strict=True)) if rows else (0,) * max(n, 0)


@dataclass(frozen=True, slots=True)
class BucketPlan:
    """Where the buckets go: edges aligned to multiples of ``width_ms`` (UTC), the first
    and last clipped to ``[start_ms, end_ms)``."""

    unit: str
    width_ms: int
    edges: tuple[int, ...]


def pick_bucket(start_ms: int, end_ms: int, unit: str, max_buckets: int) -> BucketPlan:
    """The bucket plan for ``[start_ms, end_ms)``: ``unit`` is a key of :data:`UNITS` or
    ``"auto"`` (the smallest width giving at most ``max_buckets`` buckets; past 30 days,
    whole multiples of a day). Raises :class:`InvalidQueryError` for an empty range, an
    unknown unit or a unit that would need more than ``max_buckets`` buckets."""
    if end_ms <= start_ms:
        raise InvalidQueryError(f"the time range is empty: from {start_ms} is not before to {end_ms}")
    if not 1 <= max_buckets <= MAX_BUCKETS:
        raise InvalidQueryError(f"max_buckets must be within 1..{MAX_BUCKETS}, got {max_buckets}")
    if unit == "auto":
        name, width = _auto_width(start_ms, end_ms, max_buckets)
    elif unit in UNITS:
        name, width = unit, UNITS[unit]
    else:
        raise InvalidQueryError(f"unknown bucket {unit!r}: use auto or one of {', '.join(UNITS)}")
    needed = _bucket_count(start_ms, end_ms, width)
    if needed > max_buckets:
        raise InvalidQueryError(
            f"{needed} buckets of one {name} would be needed for this range, more than "
            f"max_buckets={max_buckets}: choose a wider bucket or a shorter range"
        )
    return BucketPlan(name, width, _edges(start_ms, end_ms, width))


def _auto_width(start_ms: int, end_ms: int, max_buckets: int) -> tuple[str, int]:
    for name, width in UNITS.items():
        if _bucket_count(start_ms, end_ms, width) <= max_buckets:
            return name, width
    day = UNITS["day"]
    days = -(-(end_ms - start_ms) // (day * max_buckets)) + 1
    return f"{days} days", days * day


def _bucket_count(start_ms: int, end_ms: int, width: int) -> int:
    """How many buckets :func:`_edges` makes, without making them."""
    first_inner = (start_ms // width + 1) * width
    return 1 + max(0, -(-(end_ms - first_inner) // width))


def _edges(start_ms: int, end_ms: int, width: int) -> tuple[int, ...]:
    first_inner = (start_ms // width + 1) * width
    return (start_ms, *range(first_inner, end_ms, width), end_ms)


def topic_span(logs: Sequence[PartitionLog]) -> tuple[int, int] | None:
    """``[from, to)`` covering every visible record of ``logs`` (``to`` is the largest
    timestamp + 1), from segment metadata, the ``.skip`` blocks' and unindexed tails'
    bounds (a block that begins before the log start may widen ``from`` a little: its
    bound covers a few records no longer visible); ``None`` when no partition holds a
    record."""
    lows, highs = [], []
    for log in logs:
        low = _lowest_timestamp(log)
        if low is not None:
            lows.append(low)
            highs.append(log.max_timestamp)
    if not lows:
        return None
    low = min(lows)
    return low, max(*highs, low) + 1


def _lowest_timestamp(log: PartitionLog) -> int | None:
    """A lower bound of the visible records' timestamps (their smallest, unless a summary
    reaches back before the log start), ``None`` when there is no visible data record."""
    start = log.log_start_offset
    lows: list[int] = []
    for seg in log.segments:
        if seg.next_offset <= start:
            continue
        start_pos = _start_position(seg, start)
        if start_pos is None:
            continue
        view = index_view(seg)
        for sb in view.skip_blocks:
            if sb.end_position > start_pos and sb.summary.record_count > 0:
                lows.append(sb.summary.min_timestamp)
        tail = max(view.end_position, start_pos)
        size = seg.size
        if tail < size:
            covered, lo, hi = tail_bounds(seg, tail, size)
            if covered > tail and lo <= hi:
                lows.append(lo)
            for _, header, buf, rel in seg.spans(covered, size):
                if not header.is_control:
                    lows.append(_batch_low(header, buf, rel))
    return min(lows) if lows else None


def _batch_low(header: BatchHeader, buf: bytes, rel: int) -> int:
    """The smallest record timestamp of a batch; a bound from its header when its records
    cannot be read."""
    appended = append_time(header)
    if appended is not None:
        return appended
    try:
        return time_bounds(batch_payload(buf, header, rel), header.base_timestamp)[0]
    except (RecordsError, ValueError):
        return min(header.base_timestamp, header.max_timestamp)


def _start_position(seg: Segment, start: int) -> int | None:
    """Where the batch holding offset ``start`` begins in ``seg`` (0 when the segment
    begins at or past it), ``None`` when the segment holds nothing from there."""
    if start <= seg.base_offset:
        return 0
    found = seg.find(start)
    return None if found is None else found[0]


def histogram(
    logs: Sequence[PartitionLog], edges: Sequence[int], *, deadline: float | None = None
) -> Histogram:
    """Records per bucket between consecutive ``edges`` (increasing epoch ms) for each
    log. ``deadline`` is a :func:`time.monotonic` value; past it the histogram raises
    :class:`HistogramTimeoutError`. See the module doc for what is counted, and how."""
    if len(edges) < 2 or list(edges) != sorted(set(edges)):
        raise InvalidQueryError("histogram edges must increase (two at least)")
    work = _Work()
    parts = []
    for log in logs:
        counter = _Counter(log, edges, work, deadline)
        counter.run()
        decoded = tuple(counter.decoded)
        counts = tuple(a + b for a, b in zip(counter.counts, decoded, strict=True))
        parts.append(PartitionCounts(log.tp.partition, counts, decoded, log.size_bytes))
    return Histogram(tuple(edges), tuple(parts), work.blocks, work.counted, work.scanned)


@dataclass
class _Work:
    blocks: int = 0
    counted: int = 0
    scanned: int = 0


class _Counter:
    """One partition's counts per bucket, over a snapshot of its segments: ``counts``
    from summaries and headers, ``decoded`` from record timestamps."""

    def __init__(self, log: PartitionLog, edges: Sequence[int], work: _Work, deadline: float | None) -> None:
        self.log = log
        self.start = log.log_start_offset
        self.edges = list(edges)
        self.packed = array("q", self.edges)
        self.first, self.last = self.edges[0], self.edges[-1]
        self.counts = [0] * (len(self.edges) - 1)
        self.decoded = array("q", self.counts)
        self.work = work
        self.deadline = deadline
        self.walked = 0
        self.lows: dict[_BatchKey, int] = {}

    def bucket(self, timestamp: int) -> int:
        """The bucket of ``timestamp``, which lies in ``[first, last)``."""
        return bisect.bisect_right(self.edges, timestamp) - 1

    def one_bucket(self, lo: int, hi: int) -> int | None:
        """The bucket holding all of ``[lo, hi]``, if one does."""
        if lo < self.first or hi >= self.last:
            return None
        k = self.bucket(lo)
        return k if hi < self.edges[k + 1] else None

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            tp = self.log.tp
            raise HistogramTimeoutError(
                f"the histogram of {tp.topic} took too long (partition {tp.partition}, "
                f"{len(self.edges)} edges): ask for fewer buckets or a shorter range"
            )

    def run(self) -> None:
        for seg in self.log.segments:
            if seg.next_offset <= self.start or seg.max_timestamp < self.first:
                continue
            start_pos = _start_position(seg, self.start)
            if start_pos is not None:
                self.count_segment(seg, start_pos)

    def count_segment(self, seg: Segment, start_pos: int) -> None:
        view = index_view(seg)
        for sb in view.skip_blocks:
            if sb.end_position <= start_pos:
                continue
            self.check_deadline()
            summary = sb.summary
            lo, hi = summary.min_timestamp, summary.max_timestamp
            if summary.record_count == 0 or hi < self.first or lo >= self.last:
                self.work.blocks += 1
                continue
            k = self.one_bucket(lo, hi)
            if k is not None and sb.start_position >= start_pos and sb.start_offset >= self.start:
                self.counts[k] += summary.record_count
                self.work.blocks += 1
                continue
            self.count_batches(seg, max(sb.start_position, start_pos), sb.end_position, lo)
        tail = max(view.end_position, start_pos)
        size = seg.size
        if tail >= size:
            return
        self.check_deadline()
        covered, lo, hi = tail_bounds(seg, tail, size)
        if covered > tail:
            if lo > hi or hi < self.first or lo >= self.last:
                self.work.blocks += 1
            else:
                self.count_batches(seg, tail, covered, lo)
        if covered < size:
            self.count_batches(seg, covered, size, None)

    def count_batches(self, seg: Segment, a: int, b: int, low: int | None) -> None:
        """Count the batches of ``[a, b)``, whose records are stamped ``low`` or later
        (``None``: not known)."""
        self.lows = _batch_lows(seg)
        for position, header, buf, rel in seg.spans(a, b):
            self.walked += 1
            if self.walked % _CHECK_EVERY == 0:
                self.check_deadline()
            if header.is_control or header.last_offset < self.start:
                continue
            appended = append_time(header)
            high = header.max_timestamp if appended is None else appended
            if high < self.first or (low is not None and low >= self.last):
                continue
            floor = appended if appended is not None else low
            learned = self.lows.get(_BatchKey(position, header.base_offset, header.crc))
            if learned is not None:
                floor = learned if floor is None else max(floor, learned)
            k = None if floor is None else self.one_bucket(floor, high)
            if k is not None and header.base_offset >= self.start:
                self.counts[k] += header.record_count
                self.work.counted += 1
                continue
            self.work.scanned += 1
            lowest = self.count_records(seg, header, buf, rel, appended)
            if lowest is not None and len(self.lows) < _LOWS_PER_SEGMENT:
                self.lows[_BatchKey(position, header.base_offset, header.crc)] = lowest

    def count_records(
        self, seg: Segment, header: BatchHeader, buf: bytes, rel: int, appended: int | None
    ) -> int | None:
        """Count one batch's records by their timestamps, as the range search reads them;
        returns the batch's smallest record timestamp when the compiled framing read it."""
        try:
            payload = batch_payload(buf, header, rel)
        except RecordsError as exc:
            _log.warning("%s: batch at offset %d not counted: %s", seg.log_path.name, header.base_offset, exc)
            return None
        if appended is None:
            try:
                count_times(
                    payload, header.base_timestamp, header.base_offset, self.start, self.packed, self.decoded
                )
                return time_bounds(payload, header.base_timestamp)[0]
            except ValueError:
                pass  # refused: the row-wise reader answers
        try:
            timestamp_bounds(payload, header)
            for record in iter_records(buf, rel, header):
                ts = record.timestamp
                if record.offset >= self.start and self.first <= ts < self.last:
                    self.decoded[self.bucket(ts)] += 1
        except RecordsError as exc:
            _log.warning("%s: batch at offset %d not counted: %s", seg.log_path.name, header.base_offset, exc)
        return None
