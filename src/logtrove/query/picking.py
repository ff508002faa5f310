"""Reading only the records a lookup needs: the one a key-index candidate names, and
the ones a time range holds.

Both go through :mod:`logtrove.records.pick` (compiled), which frames every record of a
batch but builds Python objects only for the records asked for. When it refuses a batch
(:class:`ValueError`: it is stricter than the row-wise readers), the answer comes from
those readers instead (:func:`~logtrove.records.iter_records`,
:func:`~logtrove.records.record.record_span`), so a damaged batch gives the same records,
warnings and errors as before and every batch gives the same records as a full decode
(``tests/query/test_picking.py``).

Costs, 10 M records on the shared 2-core machine: a candidate is one ``pread`` of its
batch (32 KiB first, the rest if the batch is larger) and one compiled call that finds and
decodes its record (about 8 µs, 5 of them the ``pread``); a batch of
a range scan with no record in the window costs its read and a framing pass in C (about
a microsecond for 200 records) instead of a pure-Python walk (about 120 µs).
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterable, Iterator

from logtrove.query.model import Stats
from logtrove.query.tail import append_time, tail_bounds
from logtrove.records import HEADER_SIZE, BatchHeader, Record, RecordsError, iter_records, read_header
from logtrove.records.compression import Compression
from logtrove.records.pick import find_record, pick_offset, pick_window
from logtrove.records.record import batch_payload, decode_record, record_span, timestamp_bounds
from logtrove.storage import Segment, Span
from logtrove.storage.derived.views import index_view
from logtrove.storage.txnview import CommittedView

_log = logging.getLogger(__name__)

_FIRST_READ = 32 * 1024  # a produced batch of ~200 small records fits: one pread per candidate
_INT64_MAX = 2**63 - 1
_RANGE_READ = 1024 * 1024  # a range scan's reads start at 64 KiB and grow to this


def batch_holding(seg: Segment, offset: int) -> Span | None:
    """The first batch whose last offset is ≥ ``offset`` (what :meth:`Segment.find` finds), read with one
    ``pread`` when the batch is within :data:`_FIRST_READ` of the offset index's entry.
    That first read ends at the next index entry when it is nearer: with batches larger
    than the index interval (every batch indexed) it reads exactly the batch."""
    start, following = seg.offset_index.positions_around(offset)
    first = _FIRST_READ if following is None else min(following - start, _FIRST_READ)
    for span in seg.spans(start, first_read=max(first, HEADER_SIZE), max_read=_FIRST_READ):
        if span.header.last_offset >= offset:
            return span
    return None


class RecordReader:
    """Records of one segment at given offsets, for checking key-index candidates: the
    batch holding each is read, and only the record asked for is decoded. The last
    decompressed payload is kept (candidates of one batch come in a row, newest first).

    A candidate costs one ``pread`` into a buffer the reader keeps and one compiled call
    (:func:`~logtrove.records.pick.find_record`), which walks the batch headers read and
    picks the record from an uncompressed batch. A compressed batch, or one it refuses, is
    picked from that buffer by :meth:`_pick`; only when the read does not decide (a batch
    or header past it, a damaged header) is the log read again by :func:`batch_holding`."""

    def __init__(self, seg: Segment, stats: Stats) -> None:
        self.seg = seg
        self.stats = stats
        self._last: tuple[int, bytes] | None = None  # position, decompressed payload
        self._buf = bytearray(_FIRST_READ)
        self._view = memoryview(self._buf)

    def record_at(self, offset: int) -> Record | None:
        seg = self.seg
        start, following = seg.offset_index.positions_around(offset)
        room = seg.size - start
        first = _FIRST_READ if following is None else min(following - start, _FIRST_READ)
        want = min(max(first, HEADER_SIZE), room)
        if want >= HEADER_SIZE:
            view = self._view[:want]
            found = find_record(view[: seg.read_into(view, start)], room, offset)
            if found is None:
                return None
            if isinstance(found, tuple):
                self.stats.bytes_scanned += found[0]
                return None if found[1] is None else Record(*found[1])
            if found >= 0:
                header = read_header(self._buf, found)
                return self._pick(
                    start + found, header, bytes(self._view[found : found + header.size]), 0, offset
                )
        held = batch_holding(seg, offset)
        if held is None or held.header.base_offset > offset:
            return None
        return self._pick(held.position, held.header, held.buffer, held.at, offset)

    def _pick(self, position: int, header: BatchHeader, buf: bytes, rel: int, offset: int) -> Record | None:
        """The record at ``offset`` of the batch at ``rel`` in ``buf`` (at ``position`` in
        the log), which holds it."""
        self.stats.bytes_scanned += header.size
        if header.compression is Compression.NONE:
            payload: bytes | memoryview = memoryview(buf)[rel + HEADER_SIZE : rel + header.size]
        elif self._last is not None and self._last[0] == position:
            payload = self._last[1]
        else:
            payload = bytes(batch_payload(buf, header, rel))
            self._last = (position, payload)
        try:
            picked = pick_offset(
                payload, header.base_offset, header.base_timestamp, append_time(header), offset
            )
        except ValueError:  # stricter than the row-wise reader: let it answer (or raise)
            return _record_by_span(payload, header, offset)
        return None if picked is None else Record(*picked)


def _record_by_span(payload: bytes | memoryview, header: BatchHeader, offset: int) -> Record | None:
    span = record_span(payload, header, offset)
    if span is None or span[0] != offset:
        return None
    return decode_record(payload[span[1] : span[2]], header)


class RangeBatches:
    """The batches a range scan reads, from ``batches`` (each ``(header, buffer, position
    in buffer)``, in log order), for offsets in ``[begin, to_offset)`` stamped from
    ``start_ms`` on, and as ``view`` (read_committed) shows them.

    Iterating yields each batch to read, and for a batch skipped on the way its next
    offset (progress): a hidden batch (an aborted transaction's) or one whose newest
    record is stamped before ``start_ms``. Control batches and batches wholly before
    ``begin`` are skipped without progress. At the first batch at or past ``to_offset`` it
    yields ``to_offset`` and stops, and :attr:`reached_end` is then true."""

    def __init__(
        self,
        batches: Iterable[tuple[BatchHeader, bytes, int]],
        begin: int,
        to_offset: int | None,
        start_ms: int | None,
        view: CommittedView | None,
    ) -> None:
        self._batches = batches
        self.begin = begin
        self.to_offset = to_offset
        self.start_ms = start_ms
        self.view = view
        self.reached_end = False

    def __iter__(self) -> Iterator[tuple[BatchHeader, bytes, int] | int]:
        to_offset, view, start_ms = self.to_offset, self.view, self.start_ms
        for header, buf, rel in self._batches:
            if to_offset is not None and header.base_offset >= to_offset:
                self.reached_end = True
                yield to_offset
                return
            if header.last_offset < self.begin or header.is_control:
                continue
            if view is not None and view.hides_batch(header):
                yield header.next_offset
                continue
            if start_ms is not None and header.max_timestamp < start_ms:
                yield header.next_offset
                continue
            yield header, buf, rel


def scan_window(
    seg: Segment,
    a: int,
    b: int,
    begin: int,
    to_offset: int | None,
    start_ms: int | None,
    end_ms: int | None,
    stats: Stats,
    view: CommittedView | None = None,
) -> Iterator[Record | int]:
    """What ``partition._scan_range`` yields for a time window and no predicate (a range
    query): the records of ``[a, b)`` with offsets in ``[begin, to_offset)`` stamped in
    ``[start_ms, end_ms)``, each batch followed by its next offset, only those records
    decoded. The part of ``[a, b)`` from the segment's unindexed tail on is first checked
    against the tail's summary (:func:`~logtrove.query.tail.tail_bounds`): what it
    covers is skipped when no record there is stamped in the window."""
    tail = index_view(seg).end_position
    pieces = [(a, tail), (tail, b)] if a < tail < b else [(a, b)]
    for x, y in pieces:
        first = x
        if x == tail:
            covered, lo, hi = tail_bounds(seg, x, y)
            if lo > hi or (start_ms is not None and hi < start_ms) or (end_ms is not None and lo >= end_ms):
                first = covered  # no record of [x, covered) is stamped in the window
        stopped = yield from _scan_batches(seg, first, y, begin, to_offset, start_ms, end_ms, stats, view)
        if stopped:
            return


def _scan_batches(
    seg: Segment,
    a: int,
    b: int,
    begin: int,
    to_offset: int | None,
    start_ms: int | None,
    end_ms: int | None,
    stats: Stats,
    view: CommittedView | None,
) -> Generator[Record | int, None, bool]:
    """:func:`scan_window` over ``[a, b)`` batch by batch; True when it reached
    ``to_offset``."""
    max_offset = _INT64_MAX if to_offset is None else to_offset
    spans = ((span.header, span.buffer, span.at) for span in seg.spans(a, b, max_read=_RANGE_READ))
    batches = RangeBatches(spans, begin, to_offset, start_ms, view)
    for item in batches:
        if isinstance(item, int):
            yield item
            continue
        header, buf, rel = item
        stats.bytes_scanned += header.size
        try:
            payload = batch_payload(buf, header, rel)
        except RecordsError as exc:
            _log.warning("%s: batch at offset %d skipped: %s", seg.log_path.name, header.base_offset, exc)
            yield header.next_offset
            continue
        try:
            picked = pick_window(
                payload,
                header.base_offset,
                header.base_timestamp,
                append_time(header),
                start_ms,
                end_ms,
                begin,
                max_offset,
                -1,
            )
        except ValueError:  # refused: the row-wise readers answer
            yield from _window_rowwise(
                seg, buf, rel, header, payload, begin, to_offset, start_ms, end_ms, stats
            )
        else:
            if picked is None:
                stats.batches_prefiltered += 1
            elif picked[0] == header.record_count:
                stats.records_scanned += picked[0]
                for t in picked[1]:
                    yield Record(*t)
            else:  # the row-wise reader yields the records, then reports the count
                yield from _window_rowwise(
                    seg, buf, rel, header, payload, begin, to_offset, start_ms, end_ms, stats
                )
        yield header.next_offset
    return batches.reached_end


def _window_rowwise(
    seg: Segment,
    buf: bytes,
    rel: int,
    header: BatchHeader,
    payload: bytes | memoryview,
    begin: int,
    to_offset: int | None,
    start_ms: int | None,
    end_ms: int | None,
    stats: Stats,
) -> Iterator[Record]:
    """The records of one batch as the row-wise readers give them (what the scan did
    before :func:`pick_window`): for batches it refuses."""
    try:
        lo, hi = timestamp_bounds(payload, header)
        if not ((start_ms is None or hi >= start_ms) and (end_ms is None or lo < end_ms)):
            stats.batches_prefiltered += 1
            return
        for r in iter_records(buf, rel, header):
            stats.records_scanned += 1
            if r.offset < begin or (to_offset is not None and r.offset >= to_offset):
                continue
            if (start_ms is None or r.timestamp >= start_ms) and (end_ms is None or r.timestamp < end_ms):
                yield r
    except RecordsError as exc:  # stored by older code (produce validates now): skip it
        _log.warning("%s: batch at offset %d skipped: %s", seg.log_path.name, header.base_offset, exc)
