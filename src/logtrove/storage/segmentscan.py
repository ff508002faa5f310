"""The three walks over a segment's ``.log`` file, batch after batch from a byte position.

::

    .log   ┌──── batch ────┬──── batch ────┬──── batch ────┬── torn / invalid ──
           │ header │ …    │ header │ …    │ header │ …    │
           └───────────────┴───────────────┴───────────────┴────────────────────
            ▲ start                                        ▲ every walk stops here

* :func:`walk_headers` (``Segment.batches``): (position, header) by the headers alone,
  in reads growing from 4 KiB to 1 MiB, so a lookup that stops after a batch or two
  reads little; it stops at the first incomplete batch or bad header.
* :func:`walk_spans` (``Segment.spans``): the batches themselves, the file read once in
  large reads, for full scans.
* :func:`walk_valid` (``Segment.recover``): every batch fully validated (CRC32C, record
  framing), stopping at the first invalid one or one whose offsets do not increase.

The walks only read: what they return is the segment's to act on. A reader's walk may
meet the writer mid-append, which is why a torn batch ends it rather than failing.
"""

from __future__ import annotations

from collections.abc import Iterator

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
_SPAN_FIRST_CHUNK = 64 * 1024


def walk_headers(file: SegmentFile, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in ``[start, end)`` of ``file``, by headers
    only; stops at the first batch that is incomplete or has a bad header. Reads start at
    4 KiB (lookups stop after a batch or two) and grow to 1 MiB for long walks."""
    for pos, header, _, _ in _walk(file, start, end, _FIRST_CHUNK, _SCAN_CHUNK, whole=False):
        yield pos, header


def walk_spans(
    file: SegmentFile, start: int, end: int, chunk: int = SPAN_CHUNK
) -> Iterator[tuple[BatchHeader, bytes, int]]:
    """(header, buffer, position of the batch in the buffer) of each whole batch in
    ``[start, end)`` of ``file``, in reads growing from 64 KiB to about ``chunk`` bytes
    (more for a larger batch); the batches end where :func:`walk_headers` ends them. A
    buffer is shared by the batches it holds."""
    for _, header, buf, rel in _walk(file, start, end, min(_SPAN_FIRST_CHUNK, chunk), chunk, whole=True):
        yield header, buf, rel


def _walk(
    file: SegmentFile, start: int, end: int, first: int, limit: int, *, whole: bool
) -> Iterator[tuple[int, BatchHeader, bytes, int]]:
    """(position, header, buffer, position in the buffer) of each whole batch in
    ``[start, end)``, in reads growing 4× from ``first`` to ``limit`` bytes. With
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
        yield pos, header, buf, rel
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
