"""Searching one partition: hash lookups newest first, and forward scans.

Both walk the partition's segments and, inside each, the blocks of its derived files
(:func:`logtrove.storage.derived.views.index_view`). Whatever no block covers, the
not-yet-indexed tail or a block written before a header was indexed, is read from the
log, so answers never depend on how far the indexer got. Every index hit is checked
against the decoded record.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from logtrove.query.fullparse import batch_decoder, matching_offsets
from logtrove.query.model import Stats
from logtrove.query.picking import RangeBatches, RecordReader, scan_window
from logtrove.query.predicates import Predicate
from logtrove.query.tail import tail_key_tables
from logtrove.records import (
    HEADER_SIZE,
    BatchHeader,
    Record,
    RecordsError,
    iter_records,
)
from logtrove.records.columnar import Decoder
from logtrove.records.compression import Compression
from logtrove.records.record import batch_payload, timestamp_bounds
from logtrove.storage import PartitionLog, Segment
from logtrove.storage.derived import keyindex
from logtrove.storage.derived.views import KeyBlock, index_view
from logtrove.storage.txnview import CommittedView

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Attribute:
    """What a hash lookup looks for: the digest, the exact test, and which key-index
    blocks indexed it."""

    digest: int
    matches: Callable[[Record], bool]
    indexed_by: Callable[[KeyBlock], bool]
    needle: bytes  # bytes every matching record holds verbatim (key, ID or header value)


class Budget:
    """What a search may still spend, shared by the partitions searched in parallel:
    bytes read, and optionally time (seconds from the budget's creation).

    Scans call :meth:`take` before each batch, so a search overruns its budget by at
    most one batch per partition: a batch is bounded (``max.message.bytes``, decompressed
    under the bounded-decompression cap) and every predicate is linear in its bytes.
    """

    def __init__(
        self,
        limit: int | None,
        time_limit_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.left = limit
        self._clock = clock
        self._deadline = None if time_limit_s is None else clock() + time_limit_s
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        """Spend ``n`` bytes; False (nothing spent) when the budget cannot cover them or
        its time is up."""
        if self._deadline is not None and self._clock() >= self._deadline:
            return False
        if self.left is None:
            return True
        with self._lock:
            if self.left <= 0:
                return False
            self.left -= n
            return True


_SCAN_READ = 1024 * 1024  # a content scan reads the log a MiB at a time


class BudgetExhaustedError(Exception):
    """Raised inside a scan when the byte budget runs out."""


def scan_records(seg: Segment, start: int, end: int, stats: Stats, needle: bytes = b"") -> Iterator[Record]:
    """Every record of the batches in ``[start, end)`` whose decompressed bytes contain
    ``needle``."""
    for _, header, buf, rel in seg.spans(start, end, first_read=_SCAN_READ, max_read=_SCAN_READ):
        stats.bytes_scanned += header.size
        if header.is_control:
            continue
        if needle and not _holds(buf, rel, header, needle):
            stats.batches_prefiltered += 1
            continue
        for record in iter_records(buf, rel, header):
            stats.records_scanned += 1
            yield record


def _holds(buf: bytes, rel: int, header: BatchHeader, needle: bytes) -> bool:
    """Whether the decompressed records of the batch at ``rel`` contain ``needle``; an
    uncompressed batch is searched where it lies in ``buf``, without a copy (the
    unindexed tail of a busy partition is searched whole by every lookup)."""
    if header.compression is Compression.NONE:
        return buf.find(needle, rel + HEADER_SIZE, rel + header.size) >= 0
    return needle in bytes(batch_payload(buf, header, rel))


def in_window(ts: int, start_ms: int | None, end_ms: int | None) -> bool:
    return (start_ms is None or ts >= start_ms) and (end_ms is None or ts < end_ms)


def in_window_bounds(lo: int, hi: int, start_ms: int | None, end_ms: int | None) -> bool:
    """Whether timestamps spanning ``[lo, hi]`` may meet ``[start_ms, end_ms)``."""
    return (start_ms is None or hi >= start_ms) and (end_ms is None or lo < end_ms)


_PROBED_AT_ONCE = 4
"""Key blocks probed in one compiled call, newest first: enough to spare most calls, few
enough that a lookup stopping at its limit early probes little it does not need."""


def lookup_newest_first(
    log: PartitionLog,
    attr: Attribute,
    stats: Stats,
    *,
    before: int | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
    committed: CommittedView | None = None,
) -> Iterator[Record]:
    """Records matching ``attr`` with offsets below ``before``, newest (highest offset)
    first, optionally within ``[start_ms, end_ms)``: segments and blocks whose
    timestamps miss the window are skipped. With ``committed``, only records it shows
    (committed, below the last stable offset)."""
    first = log.log_start_offset
    win_lo, win_hi = start_ms, end_ms

    def keep(r: Record) -> bool:
        return (
            r.offset >= first
            and (before is None or r.offset < before)
            and in_window(r.timestamp, start_ms, end_ms)
            and attr.matches(r)
            and (committed is None or committed.visible(r.offset))
        )

    for seg in reversed(log.segments):
        if before is not None and seg.base_offset >= before:
            continue
        if seg.next_offset <= first:
            break
        if win_lo is not None and seg.max_timestamp < win_lo:
            stats.segments_skipped += 1
            continue
        view = index_view(seg)
        stats.segments_scanned += 1
        reader = RecordReader(seg, stats)
        if view.end_position < seg.size and (before is None or view.end_offset < before):
            yield from _tail_matches(log, seg, view.end_position, view.end_offset, attr, keep, stats, reader)
        with view.key_reader() as keys:  # one opening of the .keyidx per segment
            probed: list[list[int]] | None = None  # candidates of blocks [low, low + len(probed))
            low = 0
            for i in reversed(range(len(view.key_blocks))):
                kb = view.key_blocks[i]
                if before is not None and kb.start_offset >= before:
                    continue
                if kb.end_offset <= first:
                    break
                if i < len(view.skip_blocks) and not view.skip_blocks[i].summary.overlaps(win_lo, win_hi):
                    stats.blocks_skipped += 1
                    continue
                if not attr.indexed_by(kb):
                    found = scan_records(seg, kb.start_position, kb.end_position, stats, attr.needle)
                    yield from reversed([r for r in found if keep(r)])
                    continue
                if probed is None or (probed and i < low):  # the next few blocks, in one call
                    low = max(0, i + 1 - _PROBED_AT_ONCE)
                    probed = keys.probe_all(view.key_blocks, attr.digest, low, i + 1) or []
                last = None
                for offset in probed[i - low] if probed else keys.candidates(kb, attr.digest):
                    if offset == last or (before is not None and offset >= before):
                        continue
                    if offset < first:
                        break
                    last = offset
                    record = _checked(reader, offset, attr, keep, stats)
                    if record is not None:
                        yield record


def _tail_matches(
    log: PartitionLog,
    seg: Segment,
    start: int,
    start_offset: int,
    attr: Attribute,
    keep: Callable[[Record], bool],
    stats: Stats,
    reader: RecordReader,
) -> Iterator[Record]:
    """The records of the unindexed tail ``[start, seg.size)`` (its first offset at least
    ``start_offset``) that ``keep`` keeps, newest first: the tail's in-memory hash tables
    (:func:`tail_key_tables`) give candidates, and what they do not cover yet is scanned
    for the needle. The oldest table may reach back before ``start``: those offsets are
    the index blocks' to answer, and are skipped here."""
    names = (log.config.message_id_header, *log.config.indexed_headers)
    covered, tables = start, tuple[bytes, ...]()
    if attr.indexed_by(KeyBlock(0, 0, 0, 0, names, 0)):
        covered, tables = tail_key_tables(seg, start, seg.size, log.config)
    scanned = [r for r in scan_records(seg, covered, seg.size, stats, attr.needle) if keep(r)]
    yield from reversed(scanned)
    found = {r.offset for r in scanned}  # a batch the tables' parser refused part-way is scanned
    last = None
    for offset in keyindex.tables_candidates(tables, attr.digest, seg.base_offset):
        if offset < start_offset:
            break  # newest first, the tables too: the rest is the index blocks'
        if offset == last or offset in found:
            continue
        last = offset
        record = _checked(reader, offset, attr, keep, stats)
        if record is not None:
            yield record


def _checked(
    reader: RecordReader, offset: int, attr: Attribute, keep: Callable[[Record], bool], stats: Stats
) -> Record | None:
    """The record at an index candidate's ``offset``, if ``keep`` keeps it. Counts the
    candidate, and a false hit when the record is not the attribute's (equal hashes)."""
    stats.index_candidates += 1
    record = reader.record_at(offset)
    if record is None:
        return None
    if keep(record):
        return record
    if not attr.matches(record):
        stats.index_false_hits += 1
    return None


Progress = int
"""An offset yielded by :func:`scan_forward`: every offset below it has been examined."""


def scan_forward(
    log: PartitionLog,
    stats: Stats,
    *,
    from_offset: int = 0,
    to_offset: int | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
    predicate: Predicate | None = None,
    budget: Budget | None = None,
    stop: threading.Event | None = None,
    view: CommittedView | None = None,
) -> Iterator[Record | Progress]:
    """Matching records in offset order, interleaved with progress offsets.

    Skips segments and ``.skip`` blocks whose time bounds miss the window or whose token
    filter lacks a token the predicate requires, and batches whose raw bytes fail the
    predicate's prefilter. Raises :class:`BudgetExhaustedError` when the budget runs out.
    With ``view`` (read_committed) the scan ends at the last stable offset and skips the
    batches of aborted transactions.
    """
    if view is not None:
        lso = view.last_stable_offset
        to_offset = lso if to_offset is None else min(to_offset, lso)
    begin = max(from_offset, log.log_start_offset)
    if start_ms is not None:
        found = log.offset_for_timestamp(start_ms)
        if found is None:
            return
        begin = max(begin, found.offset)
    tokens = predicate.required_tokens() if predicate is not None else []
    for seg in log.segments:
        if stop is not None and stop.is_set():
            return
        if seg.next_offset <= begin:
            continue
        if to_offset is not None and seg.base_offset >= to_offset:
            return
        if start_ms is not None and seg.max_timestamp < start_ms:
            stats.segments_skipped += 1
            continue
        ranges = _ranges_to_read(seg, begin, to_offset, start_ms, end_ms, tokens, stats)
        if not ranges:
            stats.segments_skipped += 1
            yield seg.next_offset
            continue
        stats.segments_scanned += 1
        for a, b in ranges:
            if predicate is None and budget is None and (start_ms is not None or end_ms is not None):
                items = scan_window(seg, a, b, begin, to_offset, start_ms, end_ms, stats, view)
            else:
                items = _scan_range(
                    seg, a, b, begin, to_offset, start_ms, end_ms, predicate, stats, budget, view
                )
            for item in items:
                if isinstance(item, int) and to_offset is not None and item >= to_offset:
                    return
                yield item
        yield seg.next_offset


def _ranges_to_read(
    seg: Segment,
    begin: int,
    to_offset: int | None,
    start_ms: int | None,
    end_ms: int | None,
    tokens: list[bytes],
    stats: Stats,
) -> list[tuple[int, int]]:
    """Position ranges of ``seg`` that may hold matches, merged."""
    start_pos = 0
    if begin > seg.base_offset:
        found = seg.find(begin)
        if found is None:
            return []
        start_pos = found[0]
    view = index_view(seg)
    ranges: list[tuple[int, int]] = []
    for sb in view.skip_blocks:
        if sb.end_position <= start_pos:
            continue
        if to_offset is not None and sb.start_offset >= to_offset:
            return _merge(ranges)
        summary = sb.summary
        if not summary.overlaps(start_ms, end_ms) or not all(summary.may_contain(t) for t in tokens):
            stats.blocks_skipped += 1
            continue
        ranges.append((max(sb.start_position, start_pos), sb.end_position))
    tail = max(view.end_position, start_pos)
    if tail < seg.size:
        ranges.append((tail, seg.size))
    return _merge(ranges)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _scan_range(
    seg: Segment,
    a: int,
    b: int,
    begin: int,
    to_offset: int | None,
    start_ms: int | None,
    end_ms: int | None,
    predicate: Predicate | None,
    stats: Stats,
    budget: Budget | None,
    view: CommittedView | None = None,
) -> Iterator[Record | Progress]:
    decoder: Decoder | None = None
    batches = (
        (span.header, span.buffer, span.at)
        for span in seg.spans(a, b, first_read=_SCAN_READ, max_read=_SCAN_READ)
    )
    for item in RangeBatches(batches, begin, to_offset, start_ms, view):
        if isinstance(item, int):
            yield item
            continue
        header, buf, rel = item
        if budget is not None and not budget.take(header.size):
            raise BudgetExhaustedError
        stats.bytes_scanned += header.size
        try:
            if start_ms is not None or end_ms is not None:
                # skip blocks are large (tens of thousands of records): a batch whose
                # records all miss the window is not decoded (a range with no match in
                # one partition read whole blocks of records otherwise)
                lo, hi = timestamp_bounds(batch_payload(buf, header, rel), header)
                if not in_window_bounds(lo, hi, start_ms, end_ms):
                    stats.batches_prefiltered += 1
                    yield header.next_offset
                    continue
            wanted = None
            if predicate is not None:
                payload = bytes(batch_payload(buf, header, rel))
                if not predicate.may_match_batch(payload):
                    stats.batches_prefiltered += 1
                    yield header.next_offset
                    continue
                decoder = decoder or batch_decoder()
                wanted = matching_offsets(
                    decoder, payload, header, predicate, begin, to_offset, (start_ms, end_ms)
                )
                if wanted is not None:  # the compiled full parse (a malformed batch: record by record)
                    stats.records_scanned += header.record_count
                    if wanted:
                        yield from (r for r in iter_records(buf, rel, header) if r.offset in wanted)
                    yield header.next_offset
                    continue
            for r in iter_records(buf, rel, header):
                stats.records_scanned += 1
                if r.offset < begin or (to_offset is not None and r.offset >= to_offset):
                    continue
                if not in_window(r.timestamp, start_ms, end_ms):
                    continue
                if predicate is None or predicate.matches(r.value):
                    yield r
        except RecordsError as exc:  # stored by older code (produce validates now): skip it
            _log.warning("%s: batch at offset %d skipped: %s", seg.log_path.name, header.base_offset, exc)
        yield header.next_offset
