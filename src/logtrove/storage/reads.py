"""Reads of a partition's log: whole batches of one segment file, sent as they are.

::

    segment .log   │ batch a  │ batch b  │ batch c  │ batch d  │ batch e ...
                              ▲                     ▲
                        position                    stop
                              └────── FileSlice ────┘

    read(o, max_bytes) with o in batch b: position is b's start; stop is the last batch
    end ≤ position + max_bytes (but at least b's end), never past the segment's end.

A read never spans two segments and never splits a batch: the slice starts at the batch
holding the requested offset (or the next surviving one, across the cleaner's gaps) and
ends at a batch boundary, one ``pread`` away from the socket. With ``max_offset`` (a
read_committed Fetch's last stable offset) the slice stops before the first batch that
begins at or above it. These functions take a snapshot of the segment list (oldest
first) and the log's bounds; they never change the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from logtrove.records import BatchHeader, Record, RecordsError, iter_records
from logtrove.records.bulk import batch_records
from logtrove.storage.errors import OffsetOutOfRangeError
from logtrove.storage.names import TopicPartition
from logtrove.storage.segment import Segment
from logtrove.storage.segments import locate


@dataclass(frozen=True, slots=True)
class FileSlice:
    """Bytes ``[position, position + size)`` of one segment's ``.log`` file."""

    segment: Segment
    position: int
    size: int

    def read(self) -> bytes:
        return self.segment.read(self.position, self.size)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches starting with the one that holds the requested offset."""

    slice: FileSlice | None
    first_offset: int | None  # base offset of the first batch returned
    log_start_offset: int
    log_end_offset: int
    # read with max_offset: an offset above every one returned (the next batch's base, or
    # max_offset); what a read_committed Fetch bounds its aborted transactions by
    upper_offset: int | None = None

    @property
    def size(self) -> int:
        return self.slice.size if self.slice else 0

    def data(self) -> bytes:
        return self.slice.read() if self.slice else b""


def check_offset(offset: int, start: int, end: int, tp: TopicPartition) -> None:
    """A read of ``tp`` may start in ``[start, end]``, the log start and end offsets;
    elsewhere :class:`OffsetOutOfRangeError`."""
    if offset < start or offset > end:
        raise OffsetOutOfRangeError(
            f"offset {offset} is out of range for {tp}: valid offsets are [{start}, {end}]",
            log_start_offset=start,
            log_end_offset=end,
        )


def read_slice(
    segments: list[Segment], offset: int, max_bytes: int, max_offset: int | None, start: int, end: int
) -> ReadResult:
    """:meth:`~logtrove.storage.log.PartitionLog.read` of ``offset`` (already checked to
    lie in ``[start, end]``, the log start and end offsets) from ``segments``."""
    limit = end if max_offset is None else min(end, max_offset)
    located = locate(segments, offset) if offset < limit else None
    if located is None or located[2].base_offset >= limit:
        return ReadResult(None, None, start, end)
    seg, position, header = located
    stop = seg.batch_end_before(position, position + max(max_bytes, 0))
    upper = None
    if max_offset is not None:
        if limit < end:
            beyond = seg.find(limit, stop)
            if beyond is not None and beyond[1].base_offset >= limit:
                stop = min(stop, beyond[0])
        after = next(seg.batches(stop), None)
        upper = min(after[1].base_offset, limit) if after is not None else limit
    return ReadResult(FileSlice(seg, position, stop - position), header.base_offset, start, end, upper)


def iter_batches(
    segments: list[Segment], begin: int, end_offset: int | None
) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, bytes) of each batch of ``segments`` holding offsets in
    ``[begin, end_offset)``, in offset order."""
    for seg, start in _walk_from(segments, begin):
        for pos, header in seg.batches(start):
            if end_offset is not None and header.base_offset >= end_offset:
                return
            yield header, seg.read(pos, header.size)


def iter_batch_spans(
    segments: list[Segment], begin: int, end_offset: int | None
) -> Iterator[tuple[BatchHeader, bytes, int]]:
    """The batches of :func:`iter_batches` as (header, buffer, position in the buffer),
    each segment read once in large reads (:meth:`Segment.spans`)."""
    for seg, start in _walk_from(segments, begin):
        for span in seg.spans(start):
            if end_offset is not None and span.header.base_offset >= end_offset:
                return
            yield span.header, span.buffer, span.at


def _walk_from(segments: list[Segment], begin: int) -> Iterator[tuple[Segment, int]]:
    """(segment, position to start at) of each segment a walk from offset ``begin``
    reads: the one :func:`locate` finds, from its position, then every later one whole."""
    located = locate(segments, begin)
    if located is None:
        return
    first_seg, position, _ = located
    for seg in segments:
        if seg.base_offset >= first_seg.base_offset:
            yield seg, position if seg is first_seg else 0


def iter_records_between(
    batches: Iterator[tuple[BatchHeader, bytes]], begin: int, end_offset: int | None
) -> Iterator[Record]:
    """The decoded records of ``batches`` with offsets in ``[begin, end_offset)``, each
    batch decoded whole (:func:`~logtrove.records.bulk.batch_records`); a batch that
    fails to decode is walked row by row, so the records before the damage come first
    and then its error, as before."""
    for header, data in batches:
        records: Iterable[Record]
        try:
            records = batch_records(data, header)
        except RecordsError:
            records = iter_records(data, 0, header)
        for record in records:
            if record.offset < begin:
                continue
            if end_offset is not None and record.offset >= end_offset:
                return
            yield record
