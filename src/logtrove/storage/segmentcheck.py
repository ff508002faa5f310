"""The check of a segment's two sparse indexes against its ``.log`` when a writer opens
it (Kafka's ``LogSegment.sanityCheck``): the indexes loaded from disk are trusted only
when the batches they name are there::

    .index      (offset O, position P) ──▶ the batch at P of .log has base offset O
    .timeindex  (timestamp T, offset O) ──▶ the batch holding O first reaches T

The per-file checks (sizes, order) are :meth:`~logtrove.storage.index.IndexFile.load`'s;
a segment whose indexes fail either is recovered, which rebuilds them from the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from logtrove.records import BatchHeader
from logtrove.storage.errors import CorruptIndexError
from logtrove.storage.index import OffsetIndex, TimeIndex

INDEX_PROBES = 8  # indexed batches checked when a segment is opened


class IndexedSegment(Protocol):
    """What the check reads of a :class:`~logtrove.storage.segment.Segment`."""

    log_path: Path
    offset_index: OffsetIndex
    time_index: TimeIndex
    first_batch_timestamp: int | None

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]: ...

    def find(self, offset: int, end: int | None = None) -> tuple[int, BatchHeader] | None: ...


def check_indexes(seg: IndexedSegment) -> None:
    """Raise :class:`CorruptIndexError` unless the indexes of ``seg`` pass these checks,
    at the cost of a few header reads: the last few offset-index entries point at batches
    with their offsets, the last few time-index entries name batches with their
    timestamps, and the time index covers the probed batches and the first one. Every
    offset-index entry was written together with a time-index entry at least as large as
    its batch's timestamps, so a time index cut short at an entry boundary (which would
    make the segment's max timestamp too small, and time lookups and retention skip the
    segment) fails this unless the cut kept what those batches need. Entries further
    back are not probed: checking them all would read the whole segment."""
    entries = seg.time_index.entries(last=INDEX_PROBES)
    newest = entries[-1][0] if entries else None
    first = seg.time_index.first_entry
    if seg.first_batch_timestamp is not None and first is not None and first[0] < seg.first_batch_timestamp:
        raise CorruptIndexError(f"{seg.time_index.path.name}: first entry is below the first batch")
    for offset, position in seg.offset_index.entries(last=INDEX_PROBES):
        indexed = next(seg.batches(position), None)
        if indexed is None or indexed[1].base_offset != offset:
            raise CorruptIndexError(
                f"{seg.offset_index.path.name}: entry ({offset}, {position}) is not a batch of the log"
            )
        if newest is None or newest < indexed[1].max_timestamp:
            raise CorruptIndexError(
                f"{seg.time_index.path.name} ends before batch at {position} of {seg.log_path.name}"
            )
    for timestamp, offset in entries:
        found = seg.find(offset)
        if found is None or (found[1].base_offset, found[1].max_timestamp) != (offset, timestamp):
            raise CorruptIndexError(
                f"{seg.time_index.path.name}: entry ({timestamp}, {offset}) is not where the log "
                "first reaches that timestamp"
            )
