"""What a partition knows of transactions: the open ones and the aborted ones.

Per partition, :class:`PartitionTxns` keeps

* ``open``: producer ID → first offset of its open transaction in this partition (the
  base offset of its first transactional batch since its last marker). The **last
  stable offset** (LSO) is the smallest of these, or the high watermark when none is
  open: every offset below it belongs to a decided transaction or to none.
* ``aborted``: ``(producer ID, first offset, marker offset)`` of each aborted
  transaction, in marker order — what a read_committed Fetch returns for the batches it
  carries so that the consumer drops them (Kafka's ``AbortedTxn``).

A followed partition (a mirror's, written only by ``append_replicated`` in the mirror's
thread) gets its markers from the leader, not from this coordinator: its state is brought
up to date by walking what was appended since the last walk, each time it is asked for,
and walked anew after the follower truncated its log (:mod:`logtrove.storage.truncate`).

Invariant: an entry of ``open`` is added by the first transactional batch of a producer
after its previous marker and removed by its next marker (COMMIT or ABORT); an ABORT
marker that closes an open entry adds one ``aborted`` entry. A marker for a producer with
nothing open (a marker written again after a crash) changes nothing.

The state lives in memory and is rebuilt from the batch headers of the log the first
time a partition is needed after a start: a walk of every header, with only the control
batches read whole (about 2.5 µs a batch). The broker's request handlers build it in a
thread (:meth:`TxnIndexes.load`) so that the walk never holds the event loop; only what
was appended meanwhile is walked on the loop. Kafka keeps the aborted list on disk per
segment (``.txnindex``) and producer snapshots, so its start reads nothing; that is the
known gap here (DESIGN.md §Transactions).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import weakref
from dataclasses import dataclass, field

from logtrove.storage import PartitionLog, StorageError
from logtrove.txn.markers import MarkerType, marker_type

log = logging.getLogger("logtrove.txn")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction of a partition: its data is in ``[first_offset, last_offset)``
    (interleaved with others' data) and its ABORT marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass
class PartitionTxns:
    """The open and aborted transactions of one partition (see the module docstring)."""

    open: dict[int, int] = field(default_factory=dict)
    aborted: list[AbortedTxn] = field(default_factory=list)
    _last_offsets: list[int] = field(default_factory=list)  # aborted[i].last_offset, for bisect
    _max_span: int = 0  # the largest last_offset - first_offset of an aborted transaction
    walked_to: int = 0  # the offset after the last batch a walk of the log has seen
    truncations: int = 0  # the log's truncation count the walk began at (storage.truncate)

    def on_transactional_batch(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch was appended at ``base_offset``."""
        self.open.setdefault(producer_id, base_offset)

    def on_marker(self, producer_id: int, kind: MarkerType, offset: int) -> None:
        """A marker of ``producer_id`` was appended at ``offset``."""
        first = self.open.pop(producer_id, None)
        if first is not None and kind is MarkerType.ABORT:
            self.aborted.append(AbortedTxn(producer_id, first, offset))
            self._last_offsets.append(offset)
            self._max_span = max(self._max_span, offset - first)

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(self.open.values(), default=high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with data in ``[start, end)``: their marker is at or
        after ``start`` and their first offset below ``end``. Only markers before
        ``end + the longest span`` can qualify, so the look-up never walks the whole list."""
        i = bisect.bisect_left(self._last_offsets, start)
        j = bisect.bisect_left(self._last_offsets, end + self._max_span + 1)
        return [a for a in self.aborted[i:j] if a.first_offset < end]

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


class TxnIndexes:
    """:class:`PartitionTxns` of each partition log, built on first use. Keyed by the log
    object itself (weakly), so a deleted and re-created topic starts afresh."""

    def __init__(self) -> None:
        self._by_log: weakref.WeakKeyDictionary[PartitionLog, PartitionTxns] = weakref.WeakKeyDictionary()

    def get(self, log: PartitionLog) -> PartitionTxns:
        """The partition's state, scanning the log the first time (call it before an
        append whose effect is then recorded, so the scan does not see that append)."""
        txns = self._by_log.get(log)
        if txns is None or txns.truncations != log.truncations:  # a follower truncated: walk anew
            txns = self._by_log[log] = scan(log)
        elif log.follower and txns.walked_to < log.log_end_offset:
            scan(log, start=txns.walked_to, into=txns)  # a mirror's appends: the leader's batches
        return txns

    async def load(self, plog: PartitionLog) -> PartitionTxns:
        """:meth:`get`, with the walk of the log done in a thread: what is below the log
        end when it starts is walked there, what was appended meanwhile on the loop. If the
        loop built the state meanwhile (an append needed it), that one is kept."""
        txns = self._by_log.get(plog)
        if txns is not None:
            return self.get(plog)
        end = plog.log_end_offset
        try:
            built = await asyncio.to_thread(scan, plog, end=end)
        except (OSError, StorageError, ValueError) as exc:  # a segment removed under the walk
            log.info("walking %s for its transactions again on the loop: %s", plog.tp, exc)
            return self.get(plog)
        txns = self._by_log.get(plog)
        if txns is None:
            txns = self._by_log[plog] = scan(plog, start=end, into=built)
        return txns

    def peek(self, log: PartitionLog) -> PartitionTxns | None:
        """The state if it is already built (no walk of a whole log: for read_uncommitted
        answers)."""
        return self.get(log) if log in self._by_log else None
