"""Transaction files for a followed partition (a mirror's standby copy).

A followed log is written only by the follower append (``append_replicated``): its
markers are the leader's, copied byte for byte, and no coordinator records them, so the
writer's bookkeeping (:class:`logtrove.txn.TxnIndexes`) never writes its
``.txnindex`` and ``.snapshot`` files. Without them every reader of a standby — the
broker's first read_committed Fetch, ``query``, ``export``, the Spark source — would walk
the whole log at each start.

:class:`FollowerTxnFiles` is the log's roll listener while it is followed. It keeps the
transactions open at the offset its walk reached (a :class:`~logtrove.storage.txnload.TxnTracker`)
and, at each roll (on the follower's thread, under the log's lock, the sealed segment
whole on disk), walks the headers of the sealed segment from there (markers read
whole), then writes the sealed segment's ``.txnindex`` and the new segment's snapshot —
what a writer's roll leaves, so the files read the same whoever wrote the log::

    sealed:  [ walked at install | walked at this roll ]   → .txnindex of sealed
    new:     [ (empty) ]                                    → .snapshot at new's base

Installed by the first follower append of a process (:func:`follow_transactions`), which
loads the state from the files and repairs those of the sealed segments missing or
wrong (:func:`logtrove.storage.txnload.load`, once, on the follower's thread). A
truncation of the log (:mod:`logtrove.storage.truncate`) or a failure to write makes the
next roll load again. The cost is one more read of each segment's batch headers, at its
roll, while it is in the page cache.
"""

from __future__ import annotations

import logging
import weakref

from logtrove.records import RecordsError
from logtrove.storage.errors import StorageError
from logtrove.storage.log import PartitionLog
from logtrove.storage.segment import Segment
from logtrove.storage.txnindex import AbortedTxn, write_snapshot, write_txn_index
from logtrove.storage.txnload import TxnTracker, load

log = logging.getLogger("logtrove.storage")

__all__ = ["FollowerTxnFiles", "follow_transactions"]

_FAILURES = (OSError, StorageError, RecordsError, ValueError)


class FollowerTxnFiles:
    """The roll listener of a followed log (see the module docstring). Touched only on the
    follower's thread: installed by its first append, called by its rolls."""

    def __init__(self, plog: PartitionLog) -> None:
        self._log = weakref.ref(plog)
        self._tracker = TxnTracker()
        self._walked_to = -1  # -1: load before the next roll's walk
        self._found: list[AbortedTxn] = []  # the aborts walked in the active segment
        self._truncations = plog.truncations
        self._load(plog)

    def _load(self, plog: PartitionLog) -> None:
        """The state at the log end, from the files; the sealed segments' files repaired."""
        try:
            segments = plog.segments
            loaded = load(
                segments, log_start_offset=plog.log_start_offset, trusted_to=plog.trusted_to, repair=True
            )
        except _FAILURES as exc:
            log.warning("cannot load the transactions of followed %s: %s", plog.tp, exc)
            self._walked_to = -1
            return
        active_base = segments[-1].base_offset
        self._tracker = TxnTracker(loaded.open)
        self._found = [a for a in loaded.aborted if a.last_offset >= active_base]
        self._walked_to = loaded.walked_to
        self._truncations = plog.truncations

    def __call__(self, sealed: Segment, new: Segment) -> None:
        plog = self._log()
        if plog is None or plog.read_only:
            return
        if plog.truncations != self._truncations or self._walked_to < sealed.base_offset:  # (or -1)
            self._load(plog)  # the new segment is listed already: the load walks nothing of it
            return
        try:
            for position, header in sealed.batches():
                if header.base_offset < self._walked_to:
                    continue
                entry = self._tracker.on_batch(sealed, position, header)
                self._walked_to = header.next_offset
                if entry is not None:
                    self._found.append(entry)
            write_txn_index(sealed, [a for a in self._found if a.last_offset >= sealed.base_offset])
            write_snapshot(new.directory, new.base_offset, self._tracker.open)
            self._found = []
        except _FAILURES as exc:  # the next roll loads again (the files are rebuilt then)
            log.warning("cannot write the transaction files of followed %s: %s", plog.tp, exc)
            self._walked_to = -1


def follow_transactions(plog: PartitionLog) -> None:
    """Make ``plog``'s rolls write its transaction files while it is followed (a no-op
    once installed; call it on the follower's thread before appending)."""
    if not plog.read_only and not isinstance(plog.roll_listener, FollowerTxnFiles):
        plog.roll_listener = FollowerTxnFiles(plog)
