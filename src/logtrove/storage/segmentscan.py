"""The walks over a segment's ``.log`` file, batch after batch from a byte position: the
one loop every reader of whole batches goes through.

::

    .log   ┌──── batch ────┬──── batch ────┬──── batch ────┬── torn / invalid ──
           │ header │ …    │ header │ …    │ header │ …    │
           └───────────────┴───────────────┴───────────────┴────────────────────
            ▲ start                                        ▲ every walk stops here

* :func:`walk_spans` (``Segment.spans``): each whole batch as a :class:`Span` (its
  position, header, and the buffer holding it), the file read in reads that grow 4× from
  ``first_read`` to ``max_read`` bytes (more for a larger batch, which is read whole). A
  lookup that stops after a batch or two reads little; a full scan reads each byte once.
  Queries, the cleaner and the indexer all walk this way.
* :func:`walk_headers` (``Segment.batches``): (position, header) by the headers alone,
  the same loop without reading past a header.
* :func:`walk_valid` (``Segment.recover``): every batch fully validated (CRC32C, record
  framing), stopping at the first invalid one or one whose offsets do not increase.

The walks only read: what they return is the segment's to act on. A reader's walk may
meet the writer mid-append, which is why a torn batch ends it rather than failing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from logtrove.records import (
    HEADER_SIZE,
    BatchHeader,
    CorruptBatchError,
    RecordsError,
    read_header,
    validate_batch,
)
from logtrove.records.batch import MIN_BATCH_LENGTH, peek_batch_size
from logtrove.storage.files import SegmentFile

RELATIVE_OFFSET_LIMIT = 2**32 - 1  # a segment's offsets are within [base, base + 2**32)
SPAN_CHUNK = 8 * 1024 * 1024
_SCAN_CHUNK = 1024 * 1024
_FIRST_CHUNK = 4096
SPAN_FIRST_READ = 64 * 1024


class Span(NamedTuple):
    """One whole batch met by a walk: where it starts in the file, its header, and the
    buffer that holds it from ``buffer[at]`` (a buffer is shared by the batches it holds)."""

    position: int
    header: BatchHeader
    buffer: bytes
    at: int


def walk_headers(file: SegmentFile, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in ``[start, end)`` of ``file``, by headers
    only; stops at the first batch that is incomplete or has a bad header. Reads start at
    4 KiB (lookups stop after a batch or two) and grow to 1 MiB for long walks."""
    for span in _walk(file, start, end, _FIRST_CHUNK, _SCAN_CHUNK, whole=False):
        yield span.position, span.header


def walk_spans(
    file: SegmentFile, start: int, end: int, *, first_read: int = SPAN_FIRST_READ, max_read: int = SPAN_CHUNK
) -> Iterator[Span]:
    """Each whole batch in ``[start, end)`` of ``file``, in reads growing 4× from
    ``first_read`` to ``max_read`` bytes (more for a larger batch); the batches end where
    :func:`walk_headers` ends them."""
    return _walk(file, start, end, min(first_read, max_read), max_read, whole=True)


def _walk(file: SegmentFile, start: int, end: int, first: int, limit: int, *, whole: bool) -> Iterator[Span]:
    """Each whole batch in ``[start, end)``, in reads growing 4× from ``first`` to
    ``limit`` bytes. With
    ``whole`` the buffer holds the batch entire (a batch running past a read is read
    again from its start); without, only its header."""
    pos = start
    buf = b""
    buf_start = pos
    step = first
    while pos + HEADER_SIZE <= end:
        rel = pos - buf_start
        if rel + HEADER_SIZE > len(buf):
            buf = file.pread(min(step, end - pos), pos)
            step = min(step * 4, limit)
            buf_start, rel = pos, 0
            if len(buf) < HEADER_SIZE:
                return
        try:
            header = read_header(buf, rel)
        except CorruptBatchError:
            return
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
            return
        if whole and rel + header.size > len(buf):  # the batch runs past this read
            buf = file.pread(min(max(step, header.size), end - pos), pos)
            step = min(step * 4, limit)
            buf_start, rel = pos, 0
            if len(buf) < header.size:  # the file shrank under us (a swap): its end
                return
        yield Span(pos, header, buf, rel)
        pos += header.size


def walk_valid(file: SegmentFile, file_size: int, base_offset: int) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch of ``file`` from its start that passes full
    validation (CRC) with offsets increasing from ``base_offset`` and within the
    segment's range; stops at the first that does not."""
    pos = 0
    next_offset = base_offset
    buf = b""
    buf_start = 0
    while pos < file_size:
        rel = pos - buf_start
        size = peek_batch_size(buf, rel) if rel + 12 <= len(buf) else None
        if size is None or rel + size > len(buf):
            want = max(_SCAN_CHUNK, size or 0)
            buf = file.pread(min(want, file_size - pos), pos)
            buf_start, rel = pos, 0
            size = peek_batch_size(buf, 0)
            if size is None or size > len(buf) or size < HEADER_SIZE:
                return
        try:
            header = validate_batch(memoryview(buf)[rel : rel + size])
        except RecordsError:
            return
        if header.base_offset < next_offset or header.last_offset - base_offset > RELATIVE_OFFSET_LIMIT:
            return
        yield pos, header
        next_offset = header.next_offset
        pos += size
