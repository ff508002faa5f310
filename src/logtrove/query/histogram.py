"""Records over time for a topic's whole retention, from indexes and batch headers.

A histogram is a list of time edges ``E0 < E1 < … < En`` and, per partition, the **cut**
of each edge: ``cut(E)`` is the offset of the first record whose timestamp is ≥ E, the
answer Kafka's ListOffsets gives for E (``log end offset`` when no record has one; never
below the log start offset). Bucket ``i`` counts ``cut(E[i+1]) - cut(E[i])``::

    offsets   0 ─────────── cut(E0) ───────── cut(E1) ─────── cut(E2) ──── log end
    buckets                 └─ bucket 0 ──────┘└── bucket 1 ──┘

How a cut is found, without decoding records:

1. segments: the first segment whose running maximum timestamp reaches E (a bisect over
   the segments' ``max_timestamp``; a topic's segments are ``O(100)``);
2. batches: in it, the first batch whose max timestamp is ≥ E: the sparse time index
   (:class:`~logtrove.storage.index.TimeIndex`) gives the last indexed batch below E, then
   batch *headers* are walked from there (at most ``index.interval.bytes`` of log);
3. records: if the batch's first timestamp is ≥ E (or it is a LogAppendTime batch, whose
   records all carry its max timestamp) the cut is its base offset; only a batch that
   *straddles* E is read, and then only each record's length and timestamp delta
   (:func:`first_at_or_after`): keys, values and headers are never decoded.

So the work is one bisect, a short header walk and at most one batch scan per edge and
partition, whatever the topic's size: :data:`MAX_BUCKETS` bounds it, and a deadline is
checked at every edge (:class:`HistogramTimeoutError`).

How exact it is: the counts are exact record counts when a partition's timestamps do not
go backwards (one producer clock, or LogAppendTime) and the topic is not compacted. When
clients send timestamps out of order, each record is counted where ListOffsets places it
(between the first records ≥ E[i] and ≥ E[i+1]), so a late record is counted in the bucket
of the records around it. Like a partition's ``messages``, counts are offset spans: on a
compacted topic they include records compaction removed since, transaction markers
take an offset each, and records of aborted transactions are counted (offsets, not what a
read_committed reader sees). A batch's ``baseTimestamp`` is taken to be its first record's
timestamp, as the protocol defines it (every client writes it so).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass

from logtrove.query.errors import InvalidQueryError, QueryError
from logtrove.records import BatchHeader, RecordsError
from logtrove.records.batch import ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE
from logtrove.records.record import batch_payload
from logtrove.records.walk import first_at_or_after as cut_in_records
from logtrove.storage import PartitionLog, Segment

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
    """One partition's records per bucket, and the cuts they come from."""

    partition: int
    cuts: tuple[int, ...]  # cut(E) for every edge, non-decreasing
    size_bytes: int

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(b - a for a, b in zip(self.cuts, self.cuts[1:], strict=False))

    @property
    def records(self) -> int:
        return self.cuts[-1] - self.cuts[0] if self.cuts else 0


@dataclass(frozen=True, slots=True)
class Histogram:
    """Records per bucket ``[edges[i], edges[i+1])`` summed over ``partitions``."""

    edges: tuple[int, ...]
    partitions: tuple[PartitionCounts, ...]
    edges_walked: int  # edges that needed a header walk (the rest were settled by bisect)
    batches_scanned: int  # straddling batches whose record timestamps were read

    @property
    def counts(self) -> tuple[int, ...]:
        per = [p.counts for p in self.partitions]
        return tuple(sum(col) for col in zip(*per, strict=True)) if per else ()


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
    timestamp + 1), from segment metadata and one batch header per partition; ``None``
    when no partition holds a record."""
    lows, highs = [], []
    for log in logs:
        first = _first_visible_batch(log)
        if first is None:
            continue
        lows.append(min(first.base_timestamp, first.max_timestamp))
        highs.append(log.max_timestamp)
    if not lows:
        return None
    low = min(lows)
    return low, max(*highs, low) + 1


def _first_visible_batch(log: PartitionLog) -> BatchHeader | None:
    start = log.log_start_offset
    for seg in log.segments:
        if seg.next_offset > start:
            found = seg.find(start)
            if found is not None:
                return found[1]
    return None


def histogram(
    logs: Sequence[PartitionLog], edges: Sequence[int], *, deadline: float | None = None
) -> Histogram:
    """Records per bucket between consecutive ``edges`` (increasing epoch ms) for each
    log. ``deadline`` is a :func:`time.monotonic` value; past it the histogram raises
    :class:`HistogramTimeoutError`. See the module doc for what the counts mean."""
    if list(edges) != sorted(set(edges)):
        raise InvalidQueryError("histogram edges must increase")
    stats = _Work()
    parts = []
    for log in logs:
        cutter = _Cutter(log, stats)
        cuts = []
        for edge in edges:
            if deadline is not None and time.monotonic() > deadline:
                raise HistogramTimeoutError(
                    f"the histogram of {log.tp.topic} took too long (partition {log.tp.partition}, "
                    f"{len(edges)} edges): ask for fewer buckets"
                )
            cuts.append(cutter.cut(edge))
        parts.append(PartitionCounts(log.tp.partition, tuple(cuts), log.size_bytes))
    return Histogram(tuple(edges), tuple(parts), stats.walked, stats.scanned)


@dataclass
class _Work:
    walked: int = 0
    scanned: int = 0


class _Cutter:
    """``cut(E)`` for one partition, over a snapshot of its segments."""

    def __init__(self, log: PartitionLog, work: _Work) -> None:
        self.start = log.log_start_offset
        self.end = log.log_end_offset
        self.segments = [s for s in log.segments if s.next_offset > self.start and s.max_timestamp >= 0]
        self.running_max: list[int] = []
        for seg in self.segments:
            self.running_max.append(max(seg.max_timestamp, self.running_max[-1] if self.running_max else -1))
        self.work = work

    def cut(self, timestamp: int) -> int:
        """The offset of the first visible record with a timestamp ≥ ``timestamp``, else
        the log end offset."""
        i = bisect.bisect_left(self.running_max, timestamp)
        for seg in self.segments[i:]:
            if seg.max_timestamp < timestamp:
                continue
            found = self._cut_in(seg, timestamp)
            if found is not None:
                return found
        return max(self.end, self.start)

    def _cut_in(self, seg: Segment, timestamp: int) -> int | None:
        self.work.walked += 1
        at = self.start
        while True:
            found = seg.find_timestamp(timestamp, at)
            if found is None:
                return None
            position, header = found
            if _starts_at_or_after(header, timestamp) and header.base_offset >= self.start:
                return header.base_offset
            self.work.scanned += 1
            offset = first_at_or_after(seg.read(position, header.size), header, timestamp, self.start)
            if offset is not None:
                return offset
            at = header.next_offset


def _starts_at_or_after(header: BatchHeader, timestamp: int) -> bool:
    """Whether the batch's first record has a timestamp ≥ ``timestamp``, from its header."""
    if header.attributes & ATTR_TIMESTAMP_TYPE:  # LogAppendTime: every record has the max
        return header.max_timestamp >= timestamp
    if header.attributes & ATTR_DELETE_HORIZON:  # baseTimestamp holds the horizon instead
        return False
    return header.base_timestamp >= timestamp


def first_at_or_after(data: bytes, header: BatchHeader, timestamp: int, min_offset: int) -> int | None:
    """The offset of the first record of the batch ``data`` at offset ≥ ``min_offset`` with
    a timestamp ≥ ``timestamp``, reading only each record's length prefix, timestamp delta
    and offset delta (compiled: :func:`logtrove.records.walk.first_at_or_after`).
    ``None`` when no record qualifies."""
    if header.attributes & ATTR_TIMESTAMP_TYPE:
        return max(header.base_offset, min_offset) if header.max_timestamp >= timestamp else None
    try:
        payload = batch_payload(data, header)
        return cut_in_records(payload, header.base_timestamp, header.base_offset, timestamp, min_offset)
    except (RecordsError, ValueError) as exc:
        raise QueryError(f"batch at offset {header.base_offset} cannot be read: {exc}") from None
