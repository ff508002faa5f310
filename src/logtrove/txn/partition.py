"""What a partition knows of transactions: the open ones and the aborted ones.

Per partition, :class:`PartitionTxns` keeps

* ``open``: producer ID → first offset of its open transaction in this partition (the
  base offset of its first transactional batch since its last marker). The **last
  stable offset** (LSO) is the smallest of these, or the high watermark when none is
  open: every offset below it belongs to a decided transaction or to none.
* ``aborted``: ``(producer ID, first offset, marker offset, LSO)`` of each aborted
  transaction whose marker is at or after ``files_to``, in marker order — what a
  read_committed Fetch returns for the batches it carries so that the consumer drops
  them (Kafka's ``AbortedTxn``). Those of markers below ``files_to`` (in sealed
  segments) are not held: a Fetch reads them from the segments' ``.txnindex``
  files, as Kafka's ``collectAbortedTransactions`` does (:meth:`TxnIndexes.aborted_between`),
  so memory holds the active segment's entries (180-213 bytes each), not the partition's.

Invariant: an entry of ``open`` is added by the first transactional batch of a producer
after its previous marker and removed by its next marker (COMMIT or ABORT); an ABORT
marker that closes an open entry adds one ``aborted`` entry, also appended to the
``.txnindex`` of the segment the marker is in (:mod:`logtrove.storage.txnindex`). A
marker for a producer with nothing open (a marker written again after a crash) changes
nothing.

The state lives in memory and is loaded the first time a partition is needed after a
start from the per-segment files (:mod:`logtrove.storage.txnload`): the ``.txnindex`` of
every sealed segment and the newest ``.snapshot`` of the open transactions, then a walk
of the batch headers after that snapshot only — the active segment after a clean
shutdown. Files that are missing or damaged are rebuilt by a longer walk. While the
state is held, each roll writes the snapshot of the new segment (its open transactions)
and makes sure the sealed one has its ``.txnindex``, as Kafka's roll does.

A followed partition (a mirror's, written only by ``append_replicated`` in the mirror's
thread) gets its markers from the leader, not from this coordinator: its state is brought
up to date by walking what was appended since the last walk, each time it is asked for,
and loaded anew after the follower truncated its log (:mod:`logtrove.storage.truncate`);
its files are written by the follower's own rolls (:mod:`logtrove.storage.txnfollow`,
on the mirror's thread), so its load reads them; the entries of a sealed segment whose
file says what the walk found leave memory (:meth:`TxnIndexes._adopt`).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import functools
import logging
import os
import weakref
from dataclasses import dataclass, field

from logtrove.records import MarkerType, marker_type
from logtrove.storage import PartitionLog, StorageError
from logtrove.storage.segment import Segment
from logtrove.storage.txnindex import (
    AbortedTxn,
    append_txn_index,
    read_txn_index,
    txn_index_path,
    write_snapshot,
    write_txn_index,
)
from logtrove.storage.txnload import TxnTracker
from logtrove.storage.txnload import load as load_files

log = logging.getLogger("logtrove.txn")

__all__ = ["AbortedTxn", "PartitionTxns", "TxnIndexes", "scan"]


@dataclass
class PartitionTxns:
    """The open and aborted transactions of one partition (see the module docstring)."""

    open: dict[int, int] = field(default_factory=dict)
    aborted: list[AbortedTxn] = field(default_factory=list)
    _last_offsets: list[int] = field(default_factory=list)  # aborted[i].last_offset, for bisect
    _max_span: int = 0  # the largest last_offset - first_offset of an aborted transaction
    walked_to: int = 0  # the offset after the last batch a walk of the log has seen
    walk_start: int = 0  # where the load's walk began (the files covered what is below)
    rewrites: int = 0  # the log's cleaner rewrites the aborted list reflects
    truncations: int = 0  # the log's truncation count the walk began at (storage.truncate)
    files_to: int = 0  # aborted entries of markers below this are in .txnindex files only

    def on_transactional_batch(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch was appended at ``base_offset``."""
        self.open.setdefault(producer_id, base_offset)

    def on_marker(self, producer_id: int, kind: MarkerType, offset: int) -> AbortedTxn | None:
        """A marker of ``producer_id`` was appended at ``offset``; the aborted transaction
        it closed, if it closed one with ABORT."""
        tracker = TxnTracker(self.open)
        entry = tracker.on_marker(producer_id, kind is MarkerType.ABORT, offset)
        if entry is not None:
            self._add_aborted(entry)
        return entry

    def _add_aborted(self, entry: AbortedTxn) -> None:
        self.aborted.append(entry)
        self._last_offsets.append(entry.last_offset)
        self._max_span = max(self._max_span, entry.last_offset - entry.first_offset)

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(self.open.values(), default=high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with data in ``[start, end)``: their marker is at or
        after ``start`` and their first offset below ``end``. Only markers before
        ``end + the longest span`` can qualify, so the look-up never walks the whole list."""
        i = bisect.bisect_left(self._last_offsets, start)
        j = bisect.bisect_left(self._last_offsets, end + self._max_span + 1)
        return [a for a in self.aborted[i:j] if a.first_offset < end]

    def replace_aborted(self, entries: list[AbortedTxn]) -> None:
        self.aborted, self._last_offsets, self._max_span = [], [], 0
        for entry in entries:
            self._add_aborted(entry)

    def forget_below(self, offset: int) -> None:
        """Drop the entries of markers below ``offset`` (now read from the files)."""
        i = bisect.bisect_left(self._last_offsets, offset)
        if i:
            del self.aborted[:i], self._last_offsets[:i]
        self.files_to = max(self.files_to, offset)

    def forget_before(self, log_start_offset: int) -> None:
        """Drop the aborted transactions wholly below the log start (retention removed them)."""
        i = bisect.bisect_left(self._last_offsets, log_start_offset)
        if i:
            del self.aborted[:i], self._last_offsets[:i]


def scan(
    plog: PartitionLog, *, start: int = 0, end: int | None = None, into: PartitionTxns | None = None
) -> PartitionTxns:
    """The transactions of the batches of ``plog`` that begin in ``[start, end)``, from
    their headers (control batches read whole), added to ``into`` if given."""
    txns = PartitionTxns(truncations=plog.truncations) if into is None else into
    begin = max(start, plog.log_start_offset)
    segments = plog.segments
    for i, seg in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1].base_offset <= begin:
            continue
        found = seg.find(begin) if seg.base_offset < begin else (0, None)
        if found is None:
            continue
        for pos, header in seg.batches(found[0]):
            if end is not None and header.base_offset >= end:
                return txns
            txns.walked_to = max(txns.walked_to, header.next_offset)
            if header.base_offset < begin or header.producer_id < 0 or not header.is_transactional:
                continue
            if header.is_control:
                kind = marker_type(seg.read(pos, header.size), header)
                if kind is not None:
                    txns.on_marker(header.producer_id, kind, header.base_offset)
            else:
                txns.on_transactional_batch(header.producer_id, header.base_offset)
    return txns


def load(
    plog: PartitionLog, *, end: int | None = None, repair: bool = True, keep_from: int = 0
) -> PartitionTxns:
    """The partition's state from its transaction files plus a walk of what they do not
    cover (:func:`logtrove.storage.txnload.load`), up to ``end``. A writer's load rewrites
    the files of the sealed segments it had to walk (``repair``); aborted entries of
    markers below ``keep_from`` are left out."""
    repair = repair and not plog.read_only and not plog.follower
    rewrites = plog.rewrites  # read first: a rewrite during the load is seen by the next check
    truncations = plog.truncations
    loaded = load_files(
        plog.segments,
        log_start_offset=plog.log_start_offset,
        trusted_to=plog.trusted_to,
        end=end,
        repair=repair,
        keep_from=keep_from,
    )
    txns = PartitionTxns(
        open=loaded.open, walked_to=loaded.walked_to, walk_start=loaded.walk_start, truncations=truncations
    )
    txns.replace_aborted(loaded.aborted)
    txns.rewrites = rewrites
    return txns


# sealed segments' .txnindex entries kept parsed, across partitions: at most this many
# segments and entries (about 213 bytes each), the segment read last always kept
_CACHED_INDEXES = 256
_CACHED_ENTRIES = 65_536


def _base(seg: Segment) -> int:
    return seg.base_offset


def _held_from(plog: PartitionLog) -> int:
    """Where the aborted entries a load keeps begin: the active segment's base for a
    writer (the sealed segments' are read from their files per Fetch), 0 for a follower
    (whose list is held whole)."""
    return 0 if plog.read_only or plog.follower else plog.active.base_offset


def _has_marker(seg: Segment, offset: int) -> bool:
    """Whether the control batch at ``offset`` is still in ``seg`` (one index look-up and a
    header or two)."""
    found = seg.find(offset)
    return found is not None and found[1].base_offset == offset and found[1].is_control


class TxnIndexes:
    """:class:`PartitionTxns` of each partition log, built on first use. Keyed by the log
    object itself (weakly), so a deleted and re-created topic starts afresh."""

    def __init__(self) -> None:
        self._by_log: weakref.WeakKeyDictionary[PartitionLog, PartitionTxns] = weakref.WeakKeyDictionary()
        # (id of the segment, the log's rewrites) -> (the segment, its .txnindex entries, their
        # marker offsets); the segment is held so that its id is not reused while the entry lives
        self._indexes: collections.OrderedDict[
            tuple[int, int], tuple[Segment, list[AbortedTxn], list[int]]
        ] = collections.OrderedDict()
        self._cached_entries = 0

    def get(self, log: PartitionLog) -> PartitionTxns:
        """The partition's state, loaded the first time (call it before an append whose
        effect is then recorded, so the load does not see that append)."""
        txns = self._by_log.get(log)
        if txns is None or txns.truncations != log.truncations:  # a follower truncated: load anew
            txns = self._install(log, load(log, keep_from=_held_from(log)))
        elif log.follower and txns.walked_to < log.log_end_offset:
            scan(log, start=txns.walked_to, into=txns)  # a mirror's appends: the leader's batches
        return txns

    async def load(self, plog: PartitionLog) -> PartitionTxns:
        """:meth:`get`, with the load done in a thread: what is below the log end when it
        starts is walked there, what was appended meanwhile on the loop. If the loop built
        the state meanwhile (an append needed it), that one is kept."""
        txns = self._by_log.get(plog)
        if txns is not None:
            return self.get(plog)
        end = plog.log_end_offset
        try:
            built = await asyncio.to_thread(load, plog, end=end, keep_from=_held_from(plog))
        except (OSError, StorageError, ValueError) as exc:  # a segment removed under the walk
            log.info("loading the transactions of %s again on the loop: %s", plog.tp, exc)
            return self.get(plog)
        txns = self._by_log.get(plog)
        if txns is None:
            txns = self._install(plog, scan(plog, start=end, into=built), end)
        return txns

    def aborted_between(
        self, plog: PartitionLog, txns: PartitionTxns, start: int, end: int
    ) -> list[AbortedTxn]:
        """The aborted transactions with data in ``[start, end)`` (``end`` at most the last
        stable offset), as Kafka's ``collectAbortedTransactions``: the ``.txnindex`` of
        each sealed segment below ``txns.files_to`` from the one holding ``start`` on, in
        marker order, stopping at the first entry whose LSO reaches ``end`` (every later
        abort's data is at or past it: it was still open, or not begun, when that marker
        was written), then the entries held in memory. A consumer at the tail reads no
        file; one catching up reads the files of the segments its range spans."""
        self._seal(plog, txns)
        out: list[AbortedTxn] = []
        if start < txns.files_to:
            segments = plog.segments
            first = max(bisect.bisect_right(segments, start, key=_base) - 1, 0)
            for k in range(first, len(segments) - 1):
                if segments[k].base_offset >= txns.files_to:
                    break
                entries, lasts = self._sealed_entries(plog, segments, k)
                for i in range(bisect.bisect_left(lasts, start), len(entries)):  # earlier: last < start
                    entry = entries[i]
                    if entry.first_offset < end:
                        out.append(entry)
                    if entry.last_stable_offset >= end:
                        return out
        out.extend(txns.aborted_between(start, end))
        return out

    def _sealed_entries(
        self, plog: PartitionLog, segments: list[Segment], k: int
    ) -> tuple[list[AbortedTxn], list[int]]:
        """The ``.txnindex`` entries of sealed ``segments[k]`` and their marker offsets (kept
        parsed in a small LRU); a missing or damaged file is rebuilt from a walk of the log."""
        seg = segments[k]
        key = (id(seg), plog.rewrites)
        cached = self._indexes.get(key)
        if cached is not None and cached[0] is seg:
            self._indexes.move_to_end(key)
            return cached[1], cached[2]
        entries = read_txn_index(seg)
        if entries is None:
            entries = self._walk_segment(plog, segments, k)
        lasts = [a.last_offset for a in entries]
        self._indexes[key] = (seg, entries, lasts)
        self._cached_entries += len(entries)
        while len(self._indexes) > 1 and (
            len(self._indexes) > _CACHED_INDEXES or self._cached_entries > _CACHED_ENTRIES
        ):
            self._cached_entries -= len(self._indexes.popitem(last=False)[1][1])
        return entries, lasts

    def _walk_segment(self, plog: PartitionLog, segments: list[Segment], k: int) -> list[AbortedTxn]:
        """The aborted transactions whose marker is in sealed ``segments[k]``, from the log
        (the files before it and a walk from the newest usable snapshot); a writer writes
        the segment's ``.txnindex`` again."""
        seg, upper = segments[k], segments[k + 1].base_offset
        log.warning("the transaction index of %s is missing or damaged: walking the log", seg.log_path.name)
        loaded = load_files(
            segments[: k + 2], log_start_offset=plog.log_start_offset, trusted_to=plog.trusted_to, end=upper
        )
        entries = [a for a in loaded.aborted if seg.base_offset <= a.last_offset < upper]
        if not plog.follower and not plog.read_only and seg.is_current_file():
            self._write_index(seg, entries)
        return entries

    def _seal(self, plog: PartitionLog, txns: PartitionTxns) -> None:
        """Once the writer rolled past ``txns.files_to``: make each newly sealed segment's
        ``.txnindex`` hold its aborted transactions (an abort appended while the segment
        rolled is only in memory), then drop them from memory (``files_to`` = the active
        segment's base). A follower's files are the mirror's to write: :meth:`_adopt`."""
        if plog.read_only or plog.rewrites != txns.rewrites:
            return  # (a rewrite not yet followed: after_cleaning first)
        if plog.active.base_offset <= txns.files_to:  # no roll since: no copy of the list
            return
        if plog.follower:
            self._adopt(plog, txns)
            return
        segments = plog.segments
        active_base = segments[-1].base_offset
        for k in range(len(segments) - 1):
            seg, upper = segments[k], segments[k + 1].base_offset
            if upper <= txns.files_to:
                continue
            held = [a for a in txns.aborted if seg.base_offset <= a.last_offset < upper]
            found = read_txn_index(seg)
            if seg.base_offset >= txns.files_to:
                expected = held
            elif found is not None:  # the cleaner merged it with segments past files_to
                expected = [a for a in found if a.last_offset < txns.files_to] + held
            else:
                expected = self._walk_segment(plog, segments, k)
            if found != expected:
                self._write_index(seg, expected)
            dropped = self._indexes.pop((id(seg), plog.rewrites), None)
            if dropped is not None:
                self._cached_entries -= len(dropped[1])
        txns.forget_below(active_base)

    @staticmethod
    def _adopt(plog: PartitionLog, txns: PartitionTxns) -> None:
        """A followed log: the mirror's thread writes each sealed segment's ``.txnindex``
        at its roll (:mod:`logtrove.storage.txnfollow`). The entries of the sealed segments
        this state has walked whose file says the same leave memory, in order; the first
        segment whose file is not (yet) there or differs stops it, to be tried again."""
        segments = plog.segments
        upto = txns.files_to
        for k in range(len(segments) - 1):
            seg, upper = segments[k], segments[k + 1].base_offset
            if upper <= upto:
                continue
            if upper > txns.walked_to:
                break
            held = txns.aborted[
                bisect.bisect_left(txns._last_offsets, seg.base_offset) : bisect.bisect_left(
                    txns._last_offsets, upper
                )
            ]
            found = read_txn_index(seg)
            if found is None or [a for a in found if a.last_offset >= txns.files_to] != held:
                break
            upto = upper
        if upto > txns.files_to:
            txns.forget_below(upto)

    @staticmethod
    def _write_index(seg: Segment, entries: list[AbortedTxn]) -> None:
        try:
            write_txn_index(seg, entries)
        except OSError as exc:  # the Fetch that needs it walks again
            log.warning("cannot write the transaction index of %s: %s", seg.log_path.name, exc)

    def peek(self, log: PartitionLog) -> PartitionTxns | None:
        """The state if it is already built (no walk of a whole log: for read_uncommitted
        answers)."""
        return self.get(log) if log in self._by_log else None

    def after_cleaning(self, plog: PartitionLog, txns: PartitionTxns) -> None:
        """Follow the cleaner: once it rewrote segments, the aborted entries held in memory
        whose ABORT marker it dropped are dropped too (each marker looked up: one index
        look-up per entry held, the active segment's for a writer). Entries read from the
        files need nothing: the cleaner wrote the new segments' ``.txnindex`` with the
        entries of the markers it kept, and the parsed ones are keyed by the rewrite count.
        A Fetch must not list a transaction whose marker is gone: a consumer would skip
        that producer's batches until a marker that never comes. Call it after reading
        the log, so that a rewrite the read saw is seen here too."""
        rewrites = plog.rewrites
        if txns.rewrites == rewrites:
            return
        segments = plog.segments
        entries: list[AbortedTxn] = []
        for i, seg in enumerate(segments):
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if upper is not None and upper <= txns.files_to:
                continue  # read from its file, not held
            ours = [
                a
                for a in txns.aborted
                if a.last_offset >= seg.base_offset and (upper is None or a.last_offset < upper)
            ]
            entries.extend(ours if upper is None else [a for a in ours if _has_marker(seg, a.last_offset)])
        txns.replace_aborted(entries)
        txns.rewrites = rewrites

    def on_marker(self, plog: PartitionLog, producer_id: int, kind: MarkerType, offset: int) -> None:
        """A marker was appended at ``offset``: close the transaction and, for an abort,
        add its entry to the ``.txnindex`` of the marker's segment."""
        txns = self.get(plog)
        entry = txns.on_marker(producer_id, kind, offset)
        seg = plog.active
        if entry is None or plog.follower:
            return
        if seg.base_offset <= offset:
            try:
                append_txn_index(seg, entry)
            except OSError as exc:  # the file is gone: rewritten when the segment is sealed
                log.warning("cannot add to the transaction index of %s: %s", seg.log_path.name, exc)
        self.after_cleaning(plog, txns)
        self._seal(plog, txns)  # a roll since the last marker: its entries leave memory

    def write_end_snapshots(self) -> None:
        """At a clean shutdown (appends over): a snapshot at the log end of each partition
        whose state is held, so that the next start walks nothing
        (:mod:`logtrove.storage.txnload`)."""
        for plog, txns in list(self._by_log.items()):
            if plog.read_only or plog.follower or not plog.segments:
                continue
            try:
                write_snapshot(plog.directory, plog.log_end_offset, txns.open)
            except OSError as exc:
                log.warning("cannot write the end snapshot of %s: %s", plog.tp, exc)

    def _install(
        self, plog: PartitionLog, txns: PartitionTxns, walked_from: int | None = None
    ) -> PartitionTxns:
        """Keep ``txns`` for ``plog``. A writer's segments from the one holding
        ``walked_from`` (the load's thread left them alone: they may have been written to;
        by default the active one) get the ``.txnindex`` of what is known of them, and each
        later roll writes the files of the new and the sealed segment."""
        self._by_log[plog] = txns
        if plog.read_only or plog.follower:
            return txns
        segments = plog.segments
        bases = [seg.base_offset for seg in segments]
        first = max(
            bisect.bisect_right(bases, plog.log_end_offset if walked_from is None else walked_from) - 1, 0
        )
        for i in range(first, len(segments)):
            seg, upper = segments[i], bases[i + 1] if i + 1 < len(bases) else None
            entries = [
                a
                for a in txns.aborted
                if a.last_offset >= seg.base_offset and (upper is None or a.last_offset < upper)
            ]
            try:
                if read_txn_index(seg) != entries:
                    write_txn_index(seg, entries)
            except OSError as exc:
                log.warning("cannot write the transaction index of %s: %s", seg.log_path.name, exc)
        txns.forget_below(bases[-1])  # the sealed segments' entries are read from their files
        plog.roll_listener = functools.partial(self._on_roll, weakref.ref(plog))
        return txns

    def _on_roll(self, ref: weakref.ref[PartitionLog], sealed: Segment, new: Segment) -> None:
        """After a roll (on the writer's thread): the snapshot of the open transactions at
        the new segment's base, and the sealed segment's ``.txnindex`` created if it had
        no abort. A failure leaves the files missing: the next start walks further."""
        plog = ref()
        txns = self._by_log.get(plog) if plog is not None else None
        if txns is None:
            return
        try:
            os.close(os.open(txn_index_path(sealed), os.O_WRONLY | os.O_CREAT, 0o644))
            write_snapshot(new.directory, new.base_offset, txns.open)
        except OSError as exc:
            log.warning("cannot write the transaction files at a roll of %s: %s", new.directory.name, exc)
