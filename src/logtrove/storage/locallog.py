"""The segment files of one partition directory (Kafka's ``LocalLog``): the listed
segments, the deleted ones still open, the recovery point, rolls and flushes.

::

    topic-0/ 00…000.log  00…120.log  00…377.log (active)      listed (storage.segments)
             00…502.log.deleted                               the graveyard: still open
                                                              until file.delete.delay.ms
    recovery point ──▶ every offset below it is on disk

Durability: an append is written to the OS at once; :meth:`LocalLog.flush` fsyncs what
was written since the **recovery point** and then advances it, so every offset below the
recovery point is on disk.

Thread-safety: one writer thread appends; other threads may read, flush and apply
retention. Structural changes (roll, delete, replace, truncate) hold :attr:`LocalLog.lock`
(reentrant); readers take it only to snapshot the segment list (:attr:`LocalLog.segments`),
and deleted segments stay open for ``file.delete.delay.ms`` so a reader holding one can
finish. Flushes of one log are serialised by a flush lock of their own and never hold
:attr:`LocalLog.lock` while they fsync.

:class:`~logtrove.storage.log.PartitionLog` (Kafka's ``UnifiedLog``) builds on this class:
it adds the offsets clients see (the log start, the leader epoch), appends and retention,
and takes :attr:`LocalLog.lock` for its own changes. The structural methods here
(:meth:`LocalLog.start_segment`, :meth:`LocalLog.delete_segment`,
:meth:`LocalLog.replace_segment`) are also what a follower's truncation
(:mod:`logtrove.storage.truncate`) is made of; their caller holds :attr:`LocalLog.lock`.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from logtrove.clock import Clock
from logtrove.storage.checkpoint import fsync_dir
from logtrove.storage.config import TopicConfig
from logtrove.storage.errors import ReadOnlyError, SegmentsChangedError
from logtrove.storage.names import TopicPartition
from logtrove.storage.readonly import refresh_listing
from logtrove.storage.segment import Segment
from logtrove.storage.segments import LogSegments
from logtrove.storage.swap import CLEANED_SUFFIX, DELETED_SUFFIX, Fault, swap_in


class LocalLog:
    """The segments of one partition directory, their deletion and their flushes (module
    doc); the base of :class:`~logtrove.storage.log.PartitionLog`."""

    def __init__(
        self,
        directory: Path,
        tp: TopicPartition,
        config: TopicConfig,
        listed: LogSegments,
        *,
        clock: Clock,
        read_only: bool,
        recovery_point: int,
        clean_shutdown: bool,
    ) -> None:
        self.directory = directory
        self.tp = tp
        self.config = config
        self.clock = clock
        self.read_only = read_only
        self.lock = threading.RLock()  # held by structural changes (module doc)
        self._listed = listed
        self._graveyard: list[tuple[int, Segment]] = []  # (close/unlink after ms, segment)
        self.recovery_point = (
            min(max(recovery_point, 0), self.log_end_offset) if clean_shutdown else self.log_end_offset
        )
        self._messages_since_flush = 0
        self._last_flush_ms = clock.now_ms()
        self._flush_lock = threading.Lock()
        self._indexes_unsynced: Segment | None = None  # the active segment at the last flush
        self.flushes = 0  # flushes that fsynced something (a metric: fsync rounds, not files)
        self.rewrites = 0  # segment replacements by the cleaner (readers of derived state re-check)

    # -- the segment list (storage.segments) --------------------------------------------
    @property
    def _segments(self) -> list[Segment]:
        return self._listed.segments

    @property
    def active(self) -> Segment:
        return self._listed.active

    @property
    def segments(self) -> list[Segment]:
        """A snapshot of the segments, oldest first."""
        with self.lock:
            return list(self._segments)

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset if self._segments else 0

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self.segments)

    # -- structural changes (the caller holds the lock) ----------------------------------
    def start_segment(self, base_offset: int) -> Segment:
        """Create an empty segment at ``base_offset`` (above every listed offset) and list
        it last: it becomes the active segment."""
        seg = Segment.create(
            self.directory, base_offset, index_interval_bytes=self.config.index_interval_bytes
        )
        seg.created_ms = self.clock.now_ms()
        self._listed.add(seg)
        return seg

    def roll_segment(self, base_offset: int) -> Segment:
        """Seal the active segment and start a new one at ``base_offset``; the active
        segment itself when it is empty and already there. An empty active segment
        elsewhere is removed, since one left in the middle would be dropped on reopen."""
        with self.lock:
            old = self.active
            if old.size == 0 and old.base_offset == base_offset:
                return old
            if old.size == 0:
                self._listed.remove(old)
                old.delete_files()
            else:
                old.seal()
            return self.start_segment(base_offset)

    def delete_segment(self, seg: Segment) -> None:
        """Unlist a segment and rename its files to ``.deleted``; it stays open for
        ``file.delete.delay.ms`` so in-flight readers can finish."""
        self._listed.remove(seg)
        seg.rename_suffix(DELETED_SUFFIX)
        self._graveyard.append((self.clock.now_ms() + self.config.file_delete_delay_ms, seg))

    def replace_segment(self, old: Segment, new: Segment) -> None:
        """Swap ``new`` (complete, flushed, named ``.cleaned``, with the base of ``old``) in
        for ``old`` through the swap of :mod:`logtrove.storage.swap`; ``old``, renamed
        ``.deleted``, stays open for ``file.delete.delay.ms`` as a deleted segment does."""
        swap_in(self.directory, new, [old])
        self._listed.replace_run(self._segments.index(old), 1, new)
        self._graveyard.append((self.clock.now_ms() + self.config.file_delete_delay_ms, old))

    def purge_deleted(self, *, force: bool = False) -> int:
        """Close and unlink deleted segments whose delay has passed. Returns how many.
        A read-only opening only closes them: the files are the writer's (its graveyard
        also holds segments it merely reopened, whose files are live)."""
        now = self.clock.now_ms()
        with self.lock:
            due = [(t, s) for t, s in self._graveyard if force or t <= now]
            self._graveyard = [(t, s) for t, s in self._graveyard if not (force or t <= now)]
        for _, seg in due:
            if self.read_only:
                seg.close()
            else:
                seg.delete_files()
        return len(due)

    # -- durability -----------------------------------------------------------------
    def flush(self) -> None:
        """fsync every segment written since the recovery point and advance it to the log
        end offset seen at the start; appends may go on meanwhile (they wait for the next
        flush). Nothing is fsynced when the recovery point is already at the log end.

        The indexes of the active segment are written but not fsynced: the last segment
        is always recovered (re-validated, re-indexed) after an unclean shutdown, so only
        its ``.log`` matters; its indexes are fsynced by the first flush after it is
        sealed (even when its data was flushed before), and by :meth:`close`. A flush is
        then one fsync instead of three, about half the time on this project's disks.

        When a flushed segment starts at or after the recovery point, its files were
        created since the last flush (a roll, or the first segment of a new partition):
        the partition directory is fsynced too, before the recovery point passes them,
        as Kafka's ``LocalLog.flush`` does; without it a power cut can lose the new
        files' directory entries, and with them fsynced data. A directory removed
        meanwhile (topic deletion) is skipped.
        """
        if self.read_only:
            return
        with self._flush_lock:
            with self.lock:
                start, target = self.recovery_point, self.log_end_offset
                self._messages_since_flush = 0
                if target <= start:
                    return
                active, sealed = self.active, self._indexes_unsynced
                dirty = [s for s in self._segments if s.next_offset > start or s in (active, sealed)]
            for seg in dirty:
                seg.flush(fsync_indexes=seg is not active)
            self._indexes_unsynced = active
            if any(seg.base_offset >= start for seg in dirty):
                with contextlib.suppress(FileNotFoundError):
                    fsync_dir(self.directory)
            with self.lock:
                self.recovery_point = max(self.recovery_point, target)
                self.flushes += 1
            self._last_flush_ms = self.clock.now_ms()

    def flush_if_due(self) -> bool:
        """Apply ``flush.ms``: fsync if unflushed data is older than it. True if flushed."""
        if self.read_only or self.recovery_point >= self.log_end_offset:
            return False
        if self.clock.now_ms() - self._last_flush_ms < self.config.flush_ms:
            return False
        self.flush()
        return True

    # -- compaction support -----------------------------------------------------------
    def new_cleaned_segment(self, base_offset: int) -> Segment:
        """An empty segment named ``.cleaned`` for the cleaner to fill."""
        return Segment.create(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            file_suffix=CLEANED_SUFFIX,
        )

    def replace_segments(self, old: list[Segment], new: Segment, fault: Fault | None = None) -> None:
        """Swap ``new`` (complete, named ``.cleaned``) in for ``old`` (consecutive, not the
        active segment), following the protocol of :mod:`logtrove.storage.swap`."""
        if self.read_only:
            raise ReadOnlyError(f"{self.tp} is open read-only")
        new.seal()
        new.flush()
        with self.lock:
            first = self._listed.sealed_run(old)
            if first is None:
                raise SegmentsChangedError(f"{self.tp}: segments changed while they were being cleaned")
            swap_in(self.directory, new, old, fault or (lambda step: None))
            self._listed.replace_run(first, len(old), new)
            self.rewrites += 1
            due = self.clock.now_ms() + self.config.file_delete_delay_ms
            self._graveyard.extend((due, seg) for seg in old)

    # -- read-only refresh ------------------------------------------------------------
    def refresh_segments(self) -> None:
        """For read-only openings: list the directory again (:mod:`logtrove.storage.readonly`)
        and close the segment objects dropped long enough ago."""
        with self.lock:
            refresh_listing(self._listed, self.directory, self.config, self._graveyard, self.clock)
            self.purge_deleted()

    def extend_active(self) -> bool:
        """For read-only openings whose directory listing is known not to have changed
        (no segment rolled, replaced or deleted): follow the writer's appends to the
        active segment in place, without listing the directory. False when the active
        segment was not simply grown (shrunk, rewritten): a full refresh is due."""
        if not self.read_only:
            return True
        with self.lock:
            return not self._listed.segments or self._listed.active.extend_read_only()

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        """Flush (writers, the active segment's indexes included) and close every file."""
        if not self.read_only:
            self.flush()
            with self.lock:
                unsynced = dict.fromkeys(
                    s for s in [*self._segments[-1:], self._indexes_unsynced] if s is not None
                )
            for seg in unsynced:
                seg.flush()
        with self.lock:
            for seg in self._segments:
                seg.close()
        self.purge_deleted(force=not self.read_only)
        for _, seg in self._graveyard:
            seg.close()

    def abandon(self) -> None:
        """Close every file without flushing, as a crash would (tests)."""
        with self.lock:
            for seg in [*self._segments, *(s for _, s in self._graveyard)]:
                seg.abandon()

    def delete_files(self) -> None:
        """Close and remove the partition's files (topic deletion)."""
        with self.lock:
            for seg in self._segments:
                seg.delete_files()
            self._listed.clear()
        self.purge_deleted(force=True)
