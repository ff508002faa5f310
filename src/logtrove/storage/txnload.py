"""The transaction state of a partition at a start, from its per-segment files.

The state a read_committed reader needs is the open transactions (producer → first
offset; the smallest is the last stable offset) and the aborted ones. Rebuilding it by a
walk of every batch header of the log costs a read of the whole log; instead::

    segment:   S0          S1          S2          S3 (active)
    files:     .txnindex   .txnindex   .txnindex
                                       .snapshot ─┐
    state  =   entries(S0) + entries(S1)  +  open(S2.snapshot)  +  walk(S2, S3)

After a clean shutdown the broker also leaves a snapshot at the log end
(:meth:`~logtrove.txn.TxnIndexes.write_end_snapshots`); with the last segment's
``.txnindex`` it makes the walk empty. A writer's load removes it afterwards (it names no
segment, so retention would not).

:func:`start_state` takes the newest snapshot ``Sk`` such that every segment below it has a
valid ``.txnindex`` and both are trusted (below the recovery point of an unclean
shutdown: files of the segments recovery re-validated may be stale or missing entries),
and the walk (:func:`load`) reads only the headers from ``Sk`` on. A missing or damaged
file moves the start back to an older snapshot, or to the first segment (no snapshot:
nothing open) — a longer walk, never an error. A writer (``repair=True``) rewrites the
``.txnindex`` and snapshots of the segments it walked that were missing or wrong, so the
next start reads only the files.

The rules are Kafka's, as :mod:`logtrove.storage.txnview` describes them: a producer's
first transactional data batch after its previous marker opens its transaction; its next
marker closes it; an ABORT marker that closes one adds an :class:`AbortedTxn`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from logtrove.clock import ascii_int
from logtrove.records import BatchHeader, MarkerType, marker_type
from logtrove.storage.segment import Segment
from logtrove.storage.txnindex import (
    SNAPSHOT_SUFFIX,
    AbortedTxn,
    read_snapshot,
    read_txn_index,
    write_snapshot,
    write_txn_index,
)

log = logging.getLogger("logtrove.storage")


@dataclass
class TxnTracker:
    """Open transactions as batches go by (producer ID → first offset)."""

    open: dict[int, int] = field(default_factory=dict)

    def on_data(self, producer_id: int, base_offset: int) -> None:
        self.open.setdefault(producer_id, base_offset)

    def on_marker(self, producer_id: int, abort: bool, offset: int) -> AbortedTxn | None:
        """Close ``producer_id``'s transaction; the entry of an aborted one (its LSO is
        that of the moment after the marker: the earliest other open transaction, or the
        offset after the marker)."""
        first = self.open.pop(producer_id, None)
        if first is None or not abort:
            return None
        return AbortedTxn(producer_id, first, offset, min(self.open.values(), default=offset + 1))

    def on_batch(self, seg: Segment, position: int, header: BatchHeader) -> AbortedTxn | None:
        """Apply one batch of ``seg`` (a marker is read whole)."""
        if header.producer_id < 0 or not header.is_transactional:
            return None
        if not header.is_control:
            self.on_data(header.producer_id, header.base_offset)
            return None
        kind = marker_type(seg.read(position, header.size), header)
        return (
            None
            if kind is None
            else self.on_marker(header.producer_id, kind == MarkerType.ABORT, header.base_offset)
        )


@dataclass(frozen=True, slots=True)
class StartState:
    """Where a walk starts: segment ``index`` of the list, with the transactions open at
    its base and the aborted ones whose markers are below it."""

    index: int
    open: dict[int, int]
    aborted: list[AbortedTxn]


def start_state(segments: list[Segment], trusted_to: int, keep_from: int = 0) -> StartState:
    """The newest start the files allow (see the module docstring); ``trusted_to``: files
    of segments reaching past it are not read; entries of markers below ``keep_from`` are
    checked, not kept."""
    below: list[list[AbortedTxn]] = []
    for i, seg in enumerate(segments[:-1]):
        if segments[i + 1].base_offset > trusted_to:
            break
        entries = read_txn_index(seg)
        if entries is None:
            break
        below.append([e for e in entries if e.last_offset >= keep_from] if keep_from else entries)
    if len(below) == len(segments) - 1 and segments and segments[-1].next_offset <= trusted_to:
        end = _at_end(segments[-1], below)
        if end is not None:
            return end
    for k in range(len(below), 0, -1):
        snap = read_snapshot(segments[k].directory, segments[k].base_offset)
        if snap is not None:
            return StartState(k, snap, [e for entries in below[:k] for e in entries])
    first = read_snapshot(segments[0].directory, segments[0].base_offset) if segments else None
    return StartState(0, first or {}, [])


def _at_end(active: Segment, below: list[list[AbortedTxn]]) -> StartState | None:
    """A start past the last segment, when a clean shutdown left a snapshot at the log end
    and the last segment's ``.txnindex``: nothing to walk."""
    entries = read_txn_index(active)
    snap = read_snapshot(active.directory, active.next_offset) if entries is not None else None
    if entries is None or snap is None:
        return None
    return StartState(len(below) + 1, snap, [e for found in (*below, entries) for e in found])


@dataclass
class LoadedTxns:
    """A partition's transaction state up to ``walked_to`` (the offset after the last
    batch walked), and what the load read: ``walk_start`` is the base of the first segment
    walked."""

    open: dict[int, int]
    aborted: list[AbortedTxn]
    walked_to: int
    walk_start: int


def load(
    segments: list[Segment],
    *,
    log_start_offset: int,
    trusted_to: int,
    end: int | None = None,
    repair: bool = False,
    sync: bool = False,
    keep_from: int = 0,
) -> LoadedTxns:
    """The state of the batches of ``segments`` below ``end``, from the files and a walk of
    what they do not cover. With ``repair`` (a writer), the ``.txnindex`` of each segment
    walked to its end is rewritten when it differs, and the snapshot at each next segment
    base written when missing; the last segment's index is left to the caller (it may be
    the active one, still written to). Aborted entries of markers below ``keep_from`` are
    left out of the result (a broker reads them from the files per Fetch): the load then
    holds one file's entries at a time, not the partition's."""
    start = start_state(segments, trusted_to, keep_from) if segments else StartState(0, {}, [])
    tracker = TxnTracker({p: max(f, log_start_offset) for p, f in start.open.items()})
    aborted = list(start.aborted)
    walk_start = segments[start.index].base_offset if start.index < len(segments) else _end(segments)
    walked_to = walk_start
    for i in range(start.index, len(segments)):
        seg, found, complete = segments[i], [], True
        for position, header in _batches(seg, end):
            if header.base_offset < log_start_offset and not header.is_control:
                walked_to = header.next_offset
                continue
            entry = tracker.on_batch(seg, position, header)
            walked_to = header.next_offset
            if entry is not None:
                found.append(entry)
        aborted.extend(a for a in found if a.last_offset >= keep_from)
        if end is not None and walked_to < seg.next_offset:
            complete = False
        if repair and complete and i + 1 < len(segments):
            _repair(seg, found, segments[i + 1], tracker.open, sync=sync)
        if not complete:
            break
    if repair and segments:
        remove_loose_snapshots(segments)
    return LoadedTxns(tracker.open, aborted, walked_to, walk_start)


def _end(segments: list[Segment]) -> int:
    return segments[-1].next_offset if segments else 0


def remove_loose_snapshots(segments: list[Segment]) -> None:
    """Remove the snapshots at offsets that are no segment's base (written at the log end
    by a clean shutdown, and used by the load that follows it): no retention would."""
    bases = {seg.base_offset for seg in segments}
    try:
        names = [entry.name for entry in os.scandir(segments[0].directory)]
    except OSError:
        return
    for name in names:
        base = ascii_int(name[: -len(SNAPSHOT_SUFFIX)]) if name.endswith(SNAPSHOT_SUFFIX) else None
        if base is not None and base not in bases:
            with contextlib.suppress(OSError):
                (segments[0].directory / name).unlink()


def _batches(seg: Segment, end: int | None) -> Iterator[tuple[int, BatchHeader]]:
    for position, header in seg.batches():
        if end is not None and header.base_offset >= end:
            return
        yield position, header


def _repair(
    seg: Segment, found: list[AbortedTxn], following: Segment, open_txns: dict[int, int], *, sync: bool
) -> None:
    """Make the files of sealed ``seg`` say what its walk found; a failure to write them
    is logged (the next start walks again). A segment the cleaner replaced meanwhile is
    left alone: its name is the new segment's now."""
    try:
        if not seg.is_current_file():
            return
        if read_txn_index(seg) != found:
            write_txn_index(seg, found, sync=sync)
        if read_snapshot(following.directory, following.base_offset) != open_txns:
            write_snapshot(following.directory, following.base_offset, open_txns, sync=sync)
    except OSError as exc:
        log.warning("cannot write the transaction files of %s: %s", seg.log_path.name, exc)
