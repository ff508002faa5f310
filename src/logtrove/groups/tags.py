"""Tag expressions, and exact tag-aware counting and reading over ``.tagidx``.

A record's tag is the value of its topic's ``message.tag.header`` (its last such header,
as :meth:`~logtrove.records.Record.header` reads it). A group subscribed to
``TagA || TagB`` on a topic wants only the records tagged ``TagA`` or ``TagB``; ``*``
wants every record. RocketMQ filters by tag hash in its consume queue, re-checks on the
client, and counts lag per queue ignoring tags, so a consumer of one tag sees the
backlog of all the others. Here both questions — how many unconsumed records match, and
which ones they are — are answered from each segment's ``.tagidx`` entries::

    offsets:  start                                   indexed up to        end
                │ ◀──── .tagidx entries, 8 B each ───▶ │ ◀─── log scan ───▶ │

* Indexed part: a block (≈ 64 k records) inside the range is counted from its tag list,
  which holds the number of records of each distinct tag — exact, and O(tags). A block
  the range cuts is counted from its entries: found by bisection on their relative
  offsets, counted per wanted hash with ``array.count`` (a C loop, no record decoded);
  the tag list tells whether a wanted hash is shared with another tag of the block, and
  only then (or when the block lists no tags) are its records re-checked. Counting is
  therefore exact, never an estimate.
* The rest — the not-yet-indexed tail of a segment, blocks indexed for another tag
  header name — is read from the log.

Reading (:func:`fetch_matching`) uses the same entries to find matching offsets, reads
only the batches that hold them, and re-checks every record it returns. The blocks come
from storage's tag reader (:func:`logtrove.storage.derived.tagblocks.tag_blocks`), which
decodes each block once into the readers' shared cache.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from logtrove.records import Record, RecordsError
from logtrove.records.bulk import batch_records
from logtrove.storage import PartitionLog, Segment
from logtrove.storage.derived import tagindex as tagidx
from logtrove.storage.derived.tagblocks import TagBlock, tag_blocks
from logtrove.storage.txnview import CommittedView

log = logging.getLogger(__name__)

ALL = "*"
SEPARATOR = "||"
MAX_EXPRESSION = 1000
_WINDOW = 8192  # entries examined at a time when collecting matching offsets


class InvalidTagExpressionError(ValueError):
    """A tag expression that is not ``*`` or ``Tag || Tag || …``."""


@dataclass(frozen=True, slots=True)
class TagFilter:
    """A tag expression: the wanted tags, or every record when ``tags`` is empty (``*``)."""

    tags: tuple[bytes, ...] = ()
    hashes: frozenset[int] = field(init=False, repr=False, compare=False)
    _tag_set: frozenset[bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tag_set", frozenset(self.tags))
        object.__setattr__(self, "hashes", frozenset(tagidx.tag_hash(t) for t in self.tags))

    @classmethod
    def parse(cls, expression: str) -> TagFilter:
        """``*`` (or nothing) → every record; ``TagA || TagB`` → those two tags.

        Tags are compared exactly (case-sensitive, UTF-8); spaces around ``||`` are
        ignored. Raises :class:`InvalidTagExpressionError` for an empty alternative.
        """
        text = expression.strip()
        if len(text) > MAX_EXPRESSION:
            raise InvalidTagExpressionError(f"tag expression longer than {MAX_EXPRESSION} characters")
        if text in ("", ALL):
            return cls(())
        parts = [p.strip() for p in text.split(SEPARATOR)]
        if any(not p for p in parts) or any(p == ALL for p in parts):
            raise InvalidTagExpressionError(
                f"invalid tag expression {expression!r}: use '*' or tags separated by '||', e.g. 'TagA || TagB'"
            )
        return cls(tuple(dict.fromkeys(p.encode("utf-8") for p in parts)))

    @property
    def match_all(self) -> bool:
        return not self.tags

    def matches(self, tag: bytes | None) -> bool:
        """Whether a record with this tag (``None``: untagged) is wanted."""
        return not self.tags or (tag is not None and tag in self._tag_set)

    def matches_record(self, record: Record, tag_header: str) -> bool:
        return not self.tags or self.matches(record.header(tag_header))

    def ambiguous_in(self, block_tags: frozenset[bytes] | None) -> bool:
        """Whether a block with these distinct tags (``None``: not listed) has a tag that
        is not wanted but shares a wanted hash, so its entries must be re-checked."""
        if block_tags is None:
            return True
        return any(t not in self._tag_set and tagidx.tag_hash(t) in self.hashes for t in block_tags)

    def __str__(self) -> str:
        if not self.tags:
            return ALL
        return f" {SEPARATOR} ".join(t.decode("utf-8", "replace") for t in self.tags)


# -- scanning the log ------------------------------------------------------------------------
def scan_records(segment: Segment, start: int, end: int) -> Iterator[Record]:
    """Records of ``segment`` with offsets in ``[start, end)``, decoded from the log
    (control batches and undecodable batches skipped, as the indexer skips them)."""
    found = segment.find(start)
    if found is None:
        return
    for pos, header in segment.batches(found[0]):
        if header.base_offset >= end:
            return
        if header.is_control or header.record_count == 0:
            continue
        try:
            records = batch_records(segment.read(pos, header.size), header)
        except RecordsError as exc:
            log.warning("%s: batch at offset %d skipped: %s", segment.log_path.name, header.base_offset, exc)
            continue
        for record in records:
            if start <= record.offset < end:
                yield record


@dataclass(frozen=True, slots=True)
class Piece:
    """A part of ``[start, end)`` inside one segment: indexed (one block) or not."""

    segment: Segment
    start: int
    end: int
    block: TagBlock | None


def pieces(log: PartitionLog, start: int, end: int) -> Iterator[Piece]:
    """``[max(start, log start), end)`` cut into indexed blocks and stretches to scan, in
    offset order."""
    start = max(start, log.log_start_offset)
    tag_header = log.config.message_tag_header
    for seg in log.segments:
        lo, hi = max(start, seg.base_offset), min(end, seg.next_offset)
        if lo >= hi:
            continue
        covered = seg.base_offset
        for block in tag_blocks(seg, tag_header):
            covered = block.end_offset
            a, b = max(lo, block.start_offset), min(hi, block.end_offset)
            if a < b:
                yield Piece(seg, a, b, block)
        if max(lo, covered) < hi:
            yield Piece(seg, max(lo, covered), hi, None)


# -- counting ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TagCount:
    """How many records of a range match, and what it took to know."""

    matching: int
    entries_read: int  # .tagidx entries looked at
    records_scanned: int  # records decoded from the log (un-indexed tail, re-checks)
    blocks_counted: int = 0  # whole blocks counted from their tag lists


def count_matching(
    log: PartitionLog,
    tags: TagFilter,
    start: int,
    end: int | None = None,
    committed: CommittedView | None = None,
) -> TagCount:
    """The exact number of records with offsets in ``[start, end)`` (``end``: the log end
    offset) whose tag ``tags`` wants. For ``*`` every record counts (the log is scanned
    for the un-indexed part, and ``.skip``-free: prefer the raw lag for ``*``). With
    ``committed`` (read_committed) the range ends at the last stable offset at the latest
    and the records of aborted transactions are not counted: the spans of their batches
    are counted the same way and taken off."""
    end = log.log_end_offset if end is None else end
    if committed is None:
        return _count_matching(log, tags, start, end)
    end = min(end, committed.last_stable_offset)
    total = _count_matching(log, tags, start, end)
    for lo, hi in committed.aborted_ranges(start, end):
        hidden = _count_matching(log, tags, lo, hi)
        total = TagCount(
            total.matching - hidden.matching,
            total.entries_read + hidden.entries_read,
            total.records_scanned + hidden.records_scanned,
            total.blocks_counted + hidden.blocks_counted,
        )
    return total


def _count_matching(log: PartitionLog, tags: TagFilter, start: int, end: int) -> TagCount:
    matching = entries = scanned = blocks = 0
    tag_header = log.config.message_tag_header
    for piece in pieces(log, start, end):
        block = piece.block
        if block is not None and not tags.match_all and block.covered_by(piece.start, piece.end):
            whole = block.tag_count(tags.tags)
            if whole is not None:
                matching += whole
                blocks += 1
                continue
        if block is not None and not tags.match_all and not tags.ambiguous_in(block.entries.tags):
            i, j = block.span(piece.start, piece.end)
            matching += block.count(tags.hashes, i, j)
            entries += j - i
            continue
        for record in scan_records(piece.segment, piece.start, piece.end):
            scanned += 1
            matching += tags.matches_record(record, tag_header)
    return TagCount(matching, entries, scanned, blocks)


# -- reading ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TagFetch:
    """Matching records from a start offset, and where the next read continues.

    Every offset in ``[start, next_offset)`` has been examined: ``records`` are all of its
    matches. A consumer commits ``next_offset``, which moves past the skipped records.
    """

    records: list[Record]
    next_offset: int
    log_end_offset: int


def fetch_matching(
    log: PartitionLog,
    tags: TagFilter,
    start: int,
    max_records: int = 500,
    *,
    max_scan_records: int = 50_000,
    committed: CommittedView | None = None,
) -> TagFetch:
    """Up to ``max_records`` records at offsets ≥ ``start`` that ``tags`` wants, found
    through ``.tagidx`` (only the batches holding them are read); un-indexed parts are
    scanned, at most about ``max_scan_records`` records per call.

    With ``committed`` (read_committed) the fetch ends at the last stable offset, which
    it answers as ``log_end_offset`` (as Kafka's Fetch does), and the records of aborted
    transactions are examined but not returned."""
    fetched = _fetch_matching(log, tags, start, max_records, max_scan_records, committed)
    if committed is None:
        return fetched
    shown = [r for r in fetched.records if committed.visible(r.offset)]
    return TagFetch(shown, fetched.next_offset, fetched.log_end_offset)


def _fetch_matching(
    log: PartitionLog,
    tags: TagFilter,
    start: int,
    max_records: int,
    max_scan_records: int,
    committed: CommittedView | None,
) -> TagFetch:
    end = log.log_end_offset
    if committed is not None:
        end = max(min(end, committed.last_stable_offset), log.log_start_offset)
    begin = max(start, log.log_start_offset)
    tag_header = log.config.message_tag_header
    out: list[Record] = []
    scanned = 0
    for piece in pieces(log, begin, end):
        block = piece.block
        if block is not None and not tags.match_all:
            stop = _fetch_block(piece, block, tags, out, max_records, tag_header)
        else:
            stop, scanned = _fetch_scan(piece, tags, out, max_records, tag_header, scanned, max_scan_records)
        if stop is not None:
            return TagFetch(out, stop, end)
    return TagFetch(out, max(begin, end), end)


def _fetch_block(
    piece: Piece, block: TagBlock, tags: TagFilter, out: list[Record], limit: int, tag_header: str
) -> int | None:
    """Append the matches of one indexed piece; the next offset if ``limit`` was reached."""
    if block.tag_count(tags.tags) == 0:
        return None  # none of the wanted tags in this block: skipped without a look
    i, j = block.span(piece.start, piece.end)
    rel = block.entries.rel_offsets
    for w in range(i, j, _WINDOW):
        offsets = [block.base_offset + rel[k] for k in block.positions(tags.hashes, w, min(w + _WINDOW, j))]
        stop = _read_offsets(piece.segment, offsets, tags, out, limit, tag_header)
        if stop is not None:
            return stop
    return None


def _read_offsets(
    seg: Segment, offsets: list[int], tags: TagFilter, out: list[Record], limit: int, tag_header: str
) -> int | None:
    """Read the batches holding ``offsets`` (candidates, re-checked); the next offset to
    examine if ``limit`` records were reached."""
    n = 0
    while n < len(offsets):
        found = seg.find(offsets[n])
        if found is None:
            return None
        pos, header = found
        wanted = set()
        while n < len(offsets) and offsets[n] <= header.last_offset:
            wanted.add(offsets[n])
            n += 1
        try:
            records = batch_records(seg.read(pos, header.size), header)
        except RecordsError:
            continue
        for record in records:
            if record.offset in wanted and tags.matches_record(record, tag_header):
                out.append(record)
                if len(out) >= limit:
                    return record.offset + 1
    return None


def _fetch_scan(
    piece: Piece,
    tags: TagFilter,
    out: list[Record],
    limit: int,
    tag_header: str,
    scanned: int,
    max_scan: int,
) -> tuple[int | None, int]:
    for record in scan_records(piece.segment, piece.start, piece.end):
        scanned += 1
        if tags.matches_record(record, tag_header):
            out.append(record)
            if len(out) >= limit:
                return record.offset + 1, scanned
        if scanned >= max_scan:
            return record.offset + 1, scanned
    return None, scanned


def first_matching(
    log: PartitionLog, tags: TagFilter, start: int, committed: CommittedView | None = None
) -> Record | None:
    """The first record at an offset ≥ ``start`` that ``tags`` wants (and, with
    ``committed``, that a read_committed reader sees), or ``None``."""
    position = start
    while True:
        fetched = fetch_matching(log, tags, position, 1, committed=committed)
        if fetched.records:
            return fetched.records[0]
        if fetched.next_offset >= fetched.log_end_offset or fetched.next_offset <= position:
            return None
        position = fetched.next_offset
