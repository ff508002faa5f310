"""A partition's log: an ordered list of segments with one active segment at the end.

::

    log start offset                                     log end offset (LEO)
         │                                                       │
         ▼                                                       ▼
    ┌─────────────┬─────────────┬─────────────┬──────────────────┐
    │ segment 0   │ segment 1   │ segment 2   │ active segment   │ ← append
    └─────────────┴─────────────┴─────────────┴──────────────────┘
      retention / DeleteRecords remove whole segments from the left

The hot path handles batches as opaque bytes: :meth:`PartitionLog.append` validates a
produced batch (header, CRC32C, counts, and its records walked in compiled code:
:mod:`logtrove.records.walk`), gives it offsets and the partition's leader epoch
(:mod:`logtrove.storage.epochs`) by patching its first 16 bytes (outside the CRC) and
writes it with one ``pwritev``; :meth:`PartitionLog.read` returns a slice of whole
batches of one segment file, read with one ``pread`` and sent as-is. Only a topic whose
``compression.type`` names a codec has a batch in another codec recompressed before it
is checked (:meth:`PartitionLog.recompressed`, which the broker runs in a worker thread
so that :meth:`PartitionLog.append` finds nothing left to do on its event loop).

Offsets never change once assigned. Offsets below the log start offset are invisible,
although the batch that holds the log start offset may still hold earlier records (as in
Kafka, consumers skip them).

Durability: an append is written to the OS at once and flushed as
:mod:`logtrove.storage.locallog` describes. An append fsyncs when ``flush.messages`` is
reached, unless it runs inside :func:`defer_flushes`: then it only reports that a flush
is due, and the caller (the broker's group commit) fsyncs off its event loop before
acknowledging.

Thread-safety: one writer thread appends, holding ``lock`` (see
:mod:`logtrove.storage.locallog`); other threads may read, flush and apply retention.

:class:`PartitionLog` (Kafka's ``UnifiedLog``) owns the offsets clients see, appends and
retention; each other job is a module of its own:

* :mod:`logtrove.storage.locallog`: the segment files of the directory, their rolls,
  deletion, swaps and flushes, and the lock (Kafka's ``LocalLog``; the base class);
* :mod:`logtrove.storage.segments`: the ordered segment list, lookups by offset and time;
* :mod:`logtrove.storage.loader`: opening the directory, recovery after a crash;
* :mod:`logtrove.storage.validator`: the checks (and recompression) before an append;
* :mod:`logtrove.storage.reads`: reads of whole batches of one segment;
* :mod:`logtrove.storage.retention`: which segments retention and DeleteRecords remove;
* :mod:`logtrove.storage.readonly`: a read-only view's refresh from the directory;
* :mod:`logtrove.storage.swap` and :mod:`logtrove.storage.truncate`: the cleaner's swap
  and a follower's truncation of its log end.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.records import BatchHeader, Record, set_log_append_time
from logtrove.storage.config import TopicConfig
from logtrove.storage.errors import FollowedTopicError, ReadOnlyError
from logtrove.storage.loader import load_segments
from logtrove.storage.locallog import LocalLog
from logtrove.storage.names import TopicPartition
from logtrove.storage.reads import (
    FileSlice,
    ReadResult,
    check_offset,
    iter_batch_spans,
    iter_batches,
    iter_records_between,
    read_slice,
)
from logtrove.storage.retention import below_log_start, check_delete_before, retention_victims
from logtrove.storage.segment import Segment
from logtrove.storage.segments import TimestampOffset, max_timestamp_offset, offset_for_timestamp
from logtrove.storage.validator import (
    check_produced_records,
    place_batches,
    recompress,
    recompresses,
    split_batches,
    split_replicated_batches,
)

__all__ = [
    "AppendResult",
    "DeferredFlushes",
    "FileSlice",
    "PartitionLog",
    "ReadResult",
    "TimestampOffset",
    "TopicPartition",
    "defer_flushes",
]

_STAMP = struct.Struct(">qii")  # base offset, batch length, partition leader epoch


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where a produce landed."""

    base_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int
    log_append_time: int  # the broker time for LogAppendTime topics, else -1
    log_start_offset: int


@dataclass(slots=True, eq=False)
class DeferredFlushes:
    """What the appends made inside :func:`defer_flushes` left to make durable.

    ``written`` maps each log appended to the log end offset its last append reached;
    ``due`` holds the logs whose ``flush.messages`` was reached (each would have fsynced
    inline outside the block).
    """

    written: dict[PartitionLog, int] = field(default_factory=dict)
    due: set[PartitionLog] = field(default_factory=set)


_DEFERRED: ContextVar[DeferredFlushes | None] = ContextVar("logtrove_deferred_flushes", default=None)


@contextlib.contextmanager
def defer_flushes() -> Iterator[DeferredFlushes]:
    """Within the block (in this thread or asyncio task), appends never fsync: a log whose
    ``flush.messages`` is reached is added to ``due`` instead, and the caller must flush
    it (off its event loop) before acknowledging the appends. Nothing else changes."""
    deferred = DeferredFlushes()
    token = _DEFERRED.set(deferred)
    try:
        yield deferred
    finally:
        _DEFERRED.reset(token)


class PartitionLog(LocalLog):
    """The log of one partition: offsets, appends, reads and retention, over the segment
    files of :class:`~logtrove.storage.locallog.LocalLog`."""

    def __init__(
        self,
        directory: Path,
        tp: TopicPartition,
        config: TopicConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        read_only: bool = False,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = True,
    ) -> None:
        if not read_only:
            directory.mkdir(parents=True, exist_ok=True)
        listed, self.recovered_bytes_truncated = load_segments(
            directory,
            config,
            clock,
            read_only=read_only,
            recovery_point=recovery_point,
            clean_shutdown=clean_shutdown,
        )
        super().__init__(
            directory,
            tp,
            config,
            listed,
            clock=clock,
            read_only=read_only,
            recovery_point=recovery_point,
            clean_shutdown=clean_shutdown,
        )
        self.log_start_offset = max(log_start_offset, self._segments[0].base_offset if self._segments else 0)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.follower = False  # a mirror follows this partition: only append_replicated writes
        # segments reaching past this offset were re-validated by recovery at load: files
        # derived from them that recovery does not rebuild (.txnindex, .snapshot) are not trusted
        self.trusted_to = self.log_end_offset if clean_shutdown else max(recovery_point, 0)
        # called with (sealed, new) after a roll, under the log's lock, on the writer's thread
        self.roll_listener: Callable[[Segment, Segment], None] | None = None
        self.leader_epoch = 0  # stamped into produced batches (the topic's, storage.epochs)
        self.truncations = 0  # follower truncations (storage.truncate): caches walk afresh

    # -- state ----------------------------------------------------------------------
    @property
    def max_timestamp(self) -> int:
        """Largest record timestamp in the log, -1 when empty."""
        return max((seg.max_timestamp for seg in self.segments), default=-1)

    # -- appending ------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview, *, assign_offsets: bool = True) -> AppendResult:
        """Validate and append the batches in ``data`` (usually one), all or none.

        With ``assign_offsets`` (the produce path) each batch must be a producer's batch
        (``recordCount == lastOffsetDelta + 1``) and is given offsets from the log end.
        Without it (cleaner, tests) the batches keep their offsets, which must not go
        below the log end offset.
        """
        if self.read_only:
            raise ReadOnlyError(f"{self.tp} is open read-only")
        if self.follower and assign_offsets:
            raise FollowedTopicError(
                f"{self.tp.topic} is a mirror of another cluster's topic and is read-only: "
                "produce to the source cluster instead"
            )
        batches = split_batches(data, self.config, self.tp, produced=assign_offsets)
        if assign_offsets:
            data, batches = recompress(data, batches, self.config, self.tp)
            check_produced_records(data, batches, self.config, self.tp)
        log_append_time = -1
        if self.config.message_timestamp_type == "LogAppendTime":
            log_append_time = self.clock.now_ms()
            data = bytearray(data)
            for pos, _header in batches:
                set_log_append_time(memoryview(data)[pos:], log_append_time)
            batches = split_batches(data, self.config, self.tp, produced=assign_offsets)
        return self._write(data, batches, assign_offsets=assign_offsets, log_append_time=log_append_time)

    def recompresses(self, data: bytes | bytearray | memoryview) -> bool:
        """Whether :meth:`append` would recompress ``data``: the topic's
        ``compression.type`` names a codec and a batch is in another one. Reads the batch
        headers only (no CRC): damaged bytes answer ``False`` and fail in :meth:`append`."""
        return recompresses(data, self.config)

    def recompressed(self, data: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
        """``data`` (produced batches) in the codec the topic's ``compression.type``
        names, as :meth:`append` would store it; ``data`` itself when nothing changes.

        The broker calls this in a worker thread (compression releases the GIL) and then
        appends the result, which :meth:`append` finds already in the topic's codec: the
        event loop never compresses. It touches no state of the log. Raises what
        :meth:`append` raises for the same bytes (checked the same way first)."""
        if self.config.compression is None:
            return data
        batches = split_batches(data, self.config, self.tp, produced=True)
        return recompress(data, batches, self.config, self.tp)[0]

    def append_replicated(self, data: bytes | bytearray | memoryview) -> AppendResult:
        """A follower append (Kafka's ``appendAsFollower``): the leader's batches, all or
        none, written byte for byte at their own base offsets (CRCs unchanged; offset gaps
        left by the leader's cleaner kept; control batches kept; no LogAppendTime stamp).

        Each batch is still checked as hostile input, header and CRC
        (:func:`~logtrove.records.validate_batch`) and records
        (:func:`~logtrove.records.walk.check_replicated_records`), but never rewritten;
        ``max.message.bytes`` is the leader's business and is not applied. A batch may not
        start below the log end offset (:class:`~logtrove.records.CorruptBatchError`).
        This is the only write a followed topic takes (see :attr:`follower`).
        """
        if self.read_only:
            raise ReadOnlyError(f"{self.tp} is open read-only")
        batches = split_replicated_batches(data, self.config, self.tp)
        return self._write(data, batches, assign_offsets=False, log_append_time=-1)

    def _write(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[tuple[int, BatchHeader]],
        *,
        assign_offsets: bool,
        log_append_time: int,
    ) -> AppendResult:
        """Place and write validated batches, then apply (or defer) the flush policy."""
        view = memoryview(data)
        with self.lock:
            placements = place_batches(batches, self.log_end_offset, assign_offsets=assign_offsets)
            for (pos, header), placed in zip(batches, placements, strict=True):
                self._maybe_roll(placed)
                prefix = (
                    _STAMP.pack(placed.base_offset, placed.batch_length, self.leader_epoch)
                    if assign_offsets
                    else b""
                )
                self.active.append(placed, view[pos : pos + header.size], patched_prefix=prefix)
            count = sum(h.record_count for h in placements)
            self._messages_since_flush += count
        first, last = placements[0].base_offset, placements[-1].last_offset
        max_ts = max(h.max_timestamp for h in placements)
        deferred = _DEFERRED.get()
        if deferred is not None:
            deferred.written[self] = max(deferred.written.get(self, 0), last + 1)
        if self._messages_since_flush >= self.config.flush_messages:
            if deferred is None:
                self.flush()
            else:
                deferred.due.add(self)
        return AppendResult(first, last, count, max_ts, log_append_time, self.log_start_offset)

    def _maybe_roll(self, header: BatchHeader) -> None:
        seg = self.active
        now = self.clock.now_ms()
        too_old = (
            seg.size > 0 and seg.created_ms is not None and now - seg.created_ms > self.config.segment_ms
        )
        if too_old or not seg.can_hold(header, header.base_offset, self.config.segment_bytes):
            self.roll(header.base_offset)

    def roll(self, base_offset: int | None = None) -> Segment:
        """Seal the active segment and start a new one at the log end offset."""
        with self.lock:
            old = self.active
            seg = self.roll_segment(self.log_end_offset if base_offset is None else base_offset)
            if seg is old:
                return old
            if self.roll_listener is not None and old.size:
                self.roll_listener(old, seg)
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            return seg

    # -- reading --------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> ReadResult:
        """Whole batches from one segment, starting with the batch holding ``offset``
        (or the next surviving one), up to ``max_bytes`` but always at least one batch.
        With ``max_offset`` (the last stable offset of a read_committed fetch) only the
        batches that begin below it, and none if the first does not.

        ``offset == log end offset`` gives an empty result; outside
        ``[log start, log end]`` raises :class:`OffsetOutOfRangeError`.
        """
        start, end = self.log_start_offset, self.log_end_offset
        check_offset(offset, start, end, self.tp)
        return read_slice(self.segments, offset, max_bytes, max_offset, start, end)

    def batches(
        self, start_offset: int = 0, end_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, bytes) of each batch holding offsets in ``[start_offset, end_offset)``,
        from the log start offset on. For readers off the hot path."""
        begin = max(start_offset, self.log_start_offset)
        yield from iter_batches(self.segments, begin, end_offset)

    def batch_spans(
        self, start_offset: int = 0, end_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, bytes, int]]:
        """The batches of :meth:`batches` as (header, buffer, position in the buffer),
        each segment read once in large reads: for full scans (the Spark source)."""
        begin = max(start_offset, self.log_start_offset)
        yield from iter_batch_spans(self.segments, begin, end_offset)

    def records(self, start_offset: int = 0, end_offset: int | None = None) -> Iterator[Record]:
        """Decoded records with offsets in ``[max(start, log start), end_offset)``."""
        begin = max(start_offset, self.log_start_offset)
        yield from iter_records_between(self.batches(begin, end_offset), begin, end_offset)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record (in offset order, from the log start) whose timestamp is
        ≥ ``timestamp``; ``None`` if there is none."""
        return offset_for_timestamp(self.segments, self.log_start_offset, timestamp)

    def max_timestamp_offset(self) -> TimestampOffset | None:
        """The first record carrying the largest timestamp of the visible log (ListOffsets
        -3); records below the log start offset do not count."""
        return max_timestamp_offset(self.segments, self.log_start_offset)

    # -- retention ------------------------------------------------------------------
    def truncate_before(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start offset (never backwards) and delete
        the segments wholly below it. Returns the new log start offset."""
        if self.read_only:
            raise ReadOnlyError(f"{self.tp} is open read-only")
        with self.lock:
            check_delete_before(offset, self.log_start_offset, self.log_end_offset, str(self.tp))
            self.log_start_offset = max(self.log_start_offset, offset)
            for seg in below_log_start(self._segments, self.log_start_offset):
                self.delete_segment(seg)
            return self.log_start_offset

    def follow_log_start(self, offset: int) -> int:
        """A follower's move of the log start to the leader's (its retention or
        DeleteRecords moved it): as :meth:`truncate_before`, but an ``offset`` past the
        log end empties the log, which then restarts there (Kafka's
        ``truncateFullyAndStartAt``), since the records below it are gone at the leader.
        Returns the new log start offset."""
        with self.lock:
            if offset > self.log_end_offset:
                self.roll(offset)
            return self.truncate_before(offset)

    def apply_retention(self) -> list[int]:
        """Delete old segments by ``retention.ms`` and ``retention.bytes`` (never the active
        one; only for topics whose cleanup policy includes delete). Returns deleted bases."""
        if self.read_only or not self.config.delete:
            return []
        now = self.clock.now_ms()
        with self.lock:
            victims = retention_victims(self._segments, self.config, now)
            for seg in victims:
                self.delete_segment(seg)
            if victims:
                self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        return [seg.base_offset for seg in victims]

    # -- read-only refresh ------------------------------------------------------------
    def refresh(self, log_start_offset: int | None = None) -> None:
        """For read-only openings: pick up segments and batches the writer added since,
        and drop segments it deleted."""
        if not self.read_only:
            return
        with self.lock:
            self.refresh_segments()
            if log_start_offset is not None:
                self.log_start_offset = max(self.log_start_offset, log_start_offset)
            if self._segments:
                self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)

    def __repr__(self) -> str:
        return f"PartitionLog({self.tp}, start={self.log_start_offset}, end={self.log_end_offset})"
