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

Durability: an append is written to the OS at once; :meth:`PartitionLog.flush` fsyncs
what was written since the **recovery point** and then advances it, so every offset below
the recovery point is on disk. An append fsyncs when ``flush.messages`` is reached, unless
it runs inside :func:`defer_flushes`: then it only reports that a flush is due, and the
caller (the broker's group commit) fsyncs off its event loop before acknowledging.

Thread-safety: one writer thread appends; other threads may read, flush and apply
retention. Structural changes (roll, delete, truncate) hold ``self._lock``; readers take
it only to snapshot the segment list, and deleted segments stay open for
``file.delete.delay.ms`` so a reader holding one can finish. Flushes of one log are
serialised by ``self._flush_lock`` and never hold ``self._lock`` while they fsync.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.records import (
    BatchHeader,
    CorruptBatchError,
    InvalidLengthError,
    Record,
    RecordsError,
    iter_records,
    peek_batch_size,
    read_header,
    recompress_batch,
    set_log_append_time,
    validate_batch,
    validate_produced_batch,
)
from logtrove.records.batch import CODEC_BITS, MAX_OFFSET, MIN_BATCH_LENGTH
from logtrove.records.compression import decompressed_limit
from logtrove.records.errors import OffsetOverflowError
from logtrove.records.pick import first_stamped
from logtrove.records.walk import Keyless, check_records, check_replicated_records
from logtrove.storage.checkpoint import fsync_dir
from logtrove.storage.config import TopicConfig
from logtrove.storage.errors import (
    FollowedTopicError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RecordTooLargeError,
    SegmentsChangedError,
)
from logtrove.storage.segment import LOG_SUFFIX, Segment
from logtrove.storage.swap import CLEANED_SUFFIX, DELETED_SUFFIX, Fault, recover_swaps, swap_in

_STAMP = struct.Struct(">qii")  # base offset, batch length, partition leader epoch
_REFRESH_ATTEMPTS = 10  # listings a reader takes while the writer deletes segments under it


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A topic and one of its partitions; ``str()`` is the directory name ``topic-P``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where a produce landed."""

    base_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int
    log_append_time: int  # the broker time for LogAppendTime topics, else -1
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class FileSlice:
    """Bytes ``[position, position + size)`` of one segment's ``.log`` file."""

    segment: Segment
    position: int
    size: int

    def read(self) -> bytes:
        return self.segment.read(self.position, self.size)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches starting with the one that holds the requested offset."""

    slice: FileSlice | None
    first_offset: int | None  # base offset of the first batch returned
    log_start_offset: int
    log_end_offset: int
    # read with max_offset: an offset above every one returned (the next batch's base, or
    # max_offset); what a read_committed Fetch bounds its aborted transactions by
    upper_offset: int | None = None

    @property
    def size(self) -> int:
        return self.slice.size if self.slice else 0

    def data(self) -> bytes:
        return self.slice.read() if self.slice else b""


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


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """The answer to a by-time lookup: an offset and that record's timestamp."""

    offset: int
    timestamp: int


class PartitionLog:
    """The log of one partition: segments, offsets, retention, flushing."""

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
        self.directory = directory
        self.tp = tp
        self.config = config
        self.clock = clock
        self.read_only = read_only
        self._lock = threading.RLock()
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._graveyard: list[tuple[int, Segment]] = []
        self.recovered_bytes_truncated = 0
        if not read_only:
            directory.mkdir(parents=True, exist_ok=True)
        self._load(recovery_point, clean_shutdown)
        self.log_start_offset = max(log_start_offset, self._segments[0].base_offset if self._segments else 0)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = (
            min(max(recovery_point, 0), self.log_end_offset) if clean_shutdown else self.log_end_offset
        )
        self._messages_since_flush = 0
        self._last_flush_ms = clock.now_ms()
        self._flush_lock = threading.Lock()
        self._indexes_unsynced: Segment | None = None  # the active segment at the last flush
        self.flushes = 0  # flushes that fsynced something (a metric: fsync rounds, not files)
        self.follower = False  # a mirror follows this partition: only append_replicated writes
        # segments reaching past this offset were re-validated by recovery at load: files
        # derived from them that recovery does not rebuild (.txnindex, .snapshot) are not trusted
        self.trusted_to = self.log_end_offset if clean_shutdown else max(recovery_point, 0)
        self.rewrites = 0  # segment replacements by the cleaner (readers of derived state re-check)
        # called with (sealed, new) after a roll, under the log's lock, on the writer's thread
        self.roll_listener: Callable[[Segment, Segment], None] | None = None
        self.leader_epoch = 0  # stamped into produced batches (the topic's, storage.epochs)
        self.truncations = 0  # follower truncations (storage.truncate): caches walk afresh

    # -- loading --------------------------------------------------------------------
    def _load(self, recovery_point: int, clean_shutdown: bool) -> None:
        if not self.read_only:
            recover_swaps(self.directory)
        bases = sorted(self._segment_bases())
        for i, base in enumerate(bases):
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            unflushed = next_base is None or next_base > recovery_point
            seg = self._open_listed_segment(base, recover=not clean_shutdown and unflushed)
            if seg is not None:
                self._add_segment(seg)
                self.recovered_bytes_truncated += seg.truncated_bytes
        if not self._segments:
            if self.read_only:
                return
            self._add_segment(
                Segment.create(self.directory, 0, index_interval_bytes=self.config.index_interval_bytes)
            )
        if not self.read_only:
            self._drop_empty_middle_segments()
            # segment.ms counts from the first record: a restart must not make the
            # active segment young again (it would never roll if the broker restarts
            # more often than segment.ms, and time retention would never reach it)
            first = self.active.first_batch_timestamp
            now = self.clock.now_ms()
            self.active.created_ms = now if first is None else min(now, first)
            if not clean_shutdown:
                for seg in self._segments:
                    if seg.base_offset >= self._segment_for(recovery_point).base_offset:
                        seg.flush()

    def _open_listed_segment(self, base: int, *, recover: bool) -> Segment | None:
        """Open a segment found in the directory listing; ``None`` when a read-only
        opening finds it gone (the writer deleted it since the listing)."""
        try:
            return self._open_segment(base, recover=recover)
        except FileNotFoundError:
            if not self.read_only:
                raise
            return None

    def _open_segment(self, base: int, *, recover: bool) -> Segment:
        return Segment.open(
            self.directory,
            base,
            index_interval_bytes=self.config.index_interval_bytes,
            read_only=self.read_only,
            recover=recover,
        )

    def _segment_bases(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        bases = []
        for entry in os.scandir(self.directory):
            name = entry.name
            if name.endswith(LOG_SUFFIX) and name[:-4].isdigit():
                bases.append(int(name[:-4]))
            elif not self.read_only and name.endswith((DELETED_SUFFIX, ".tmp")):
                Path(entry.path).unlink(missing_ok=True)
        return bases

    def _drop_empty_middle_segments(self) -> None:
        """A crash between creating a segment and writing to it leaves an empty file; an
        empty segment that is not the last one carries nothing and is removed."""
        for seg in list(self._segments[:-1]):
            if seg.size == 0:
                self._remove_from_list(seg)
                seg.delete_files()

    def _add_segment(self, seg: Segment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    def _remove_from_list(self, seg: Segment) -> None:
        i = self._segments.index(seg)
        del self._segments[i]
        del self._bases[i]

    def _segment_for(self, offset: int) -> Segment:
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[max(i, 0)]

    # -- state ----------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self._segments[-1]

    @property
    def segments(self) -> list[Segment]:
        """A snapshot of the segments, oldest first."""
        with self._lock:
            return list(self._segments)

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset if self._segments else 0

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self.segments)

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
        batches = self._split(data, produced=assign_offsets)
        if assign_offsets:
            data, batches = self._recompress(data, batches)
            self._check_records(data, batches)
        log_append_time = -1
        if self.config.message_timestamp_type == "LogAppendTime":
            log_append_time = self.clock.now_ms()
            data = bytearray(data)
            for pos, _header in batches:
                set_log_append_time(memoryview(data)[pos:], log_append_time)
            batches = self._split(data, produced=assign_offsets)
        return self._write(data, batches, assign_offsets=assign_offsets, log_append_time=log_append_time)

    def recompresses(self, data: bytes | bytearray | memoryview) -> bool:
        """Whether :meth:`append` would recompress ``data``: the topic's
        ``compression.type`` names a codec and a batch is in another one. Reads the batch
        headers only (no CRC): damaged bytes answer ``False`` and fail in :meth:`append`."""
        target = self.config.compression
        if target is None:
            return False
        view = memoryview(data)
        pos = 0
        while pos < len(view):
            try:
                header = read_header(view, pos)
            except RecordsError:
                return False
            if header.batch_length < MIN_BATCH_LENGTH:
                return False
            if header.attributes & CODEC_BITS != target:
                return True
            pos += header.size
        return False

    def recompressed(self, data: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
        """``data`` (produced batches) in the codec the topic's ``compression.type``
        names, as :meth:`append` would store it; ``data`` itself when nothing changes.

        The broker calls this in a worker thread (compression releases the GIL) and then
        appends the result, which :meth:`append` finds already in the topic's codec: the
        event loop never compresses. It touches no state of the log. Raises what
        :meth:`append` raises for the same bytes (checked the same way first)."""
        if self.config.compression is None:
            return data
        return self._recompress(data, self._split(data, produced=True))[0]

    def _recompress(
        self, data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]
    ) -> tuple[bytes | bytearray | memoryview, list[tuple[int, BatchHeader]]]:
        """The validated produced ``batches`` of ``data`` in the topic's codec (Kafka's
        LogValidator with a ``compression.type`` other than ``producer``), re-split; the
        same objects when there is nothing to do. A batch recompressed past
        ``max.message.bytes`` is refused, as Kafka checks the batch it stores."""
        target = self.config.compression
        if target is None or all(header.compression is target for _pos, header in batches):
            return data, batches
        view = memoryview(data)
        limit = decompressed_limit(self.config.max_message_bytes)
        out = bytearray()
        for pos, header in batches:
            batch = view[pos : pos + header.size]
            out += batch if header.compression is target else recompress_batch(batch, target, limit)
        return out, self._split(out, produced=True)

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
        batches = self._split(data, produced=False, size_limit=False)
        view = memoryview(data)
        limit = decompressed_limit(self.config.max_message_bytes)
        for pos, header in batches:
            check_replicated_records(view[pos : pos + header.size], header, limit)
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
        with self._lock:
            placements = self._place(batches, assign_offsets=assign_offsets)
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

    def _place(self, batches: list[tuple[int, BatchHeader]], *, assign_offsets: bool) -> list[BatchHeader]:
        """The headers the batches will have in the log, checked before any is written
        (so that a request whose second batch overflows appends nothing)."""
        placed: list[BatchHeader] = []
        end = self.log_end_offset
        for _pos, header in batches:
            base = end if assign_offsets else header.base_offset
            if base < end:
                raise CorruptBatchError(f"batch offset {base} is below the log end offset {end}")
            if base + header.last_offset_delta > MAX_OFFSET:
                raise OffsetOverflowError(f"assigning offset {base} overflows int64")
            placed.append(header._replace(base_offset=base))
            end = placed[-1].next_offset
        return placed

    def _split(
        self, data: bytes | bytearray | memoryview, *, produced: bool, size_limit: bool = True
    ) -> list[tuple[int, BatchHeader]]:
        """Frame and validate every batch before anything is written; with ``size_limit``
        a batch over ``max.message.bytes`` is refused."""
        max_size = self.config.max_message_bytes if size_limit else None
        out: list[tuple[int, BatchHeader]] = []
        view = memoryview(data)
        pos = 0
        validate = validate_produced_batch if produced else validate_batch
        while pos < len(view):
            size = peek_batch_size(view, pos)
            if size is None or size > len(view) - pos:
                raise InvalidLengthError(f"truncated batch at byte {pos} of {len(view)}")
            if max_size is not None and size > max_size:
                raise RecordTooLargeError(
                    f"batch of {size} bytes exceeds max.message.bytes={self.config.max_message_bytes} for {self.tp}"
                )
            out.append((pos, validate(view[pos : pos + size])))
            pos += size
        if not out:
            raise InvalidLengthError("no record batch in the request")
        return out

    def _check_records(
        self, data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]
    ) -> None:
        """Walk the records of each produced batch (decompressed to at most
        :func:`~logtrove.records.compression.decompressed_limit` of ``max.message.bytes``)
        as Kafka's LogValidator does: :func:`logtrove.records.walk.check_records`.

        Compacted topics keep the latest record per key: a keyless record has no place
        in them and the batch is refused (Kafka's INVALID_RECORD), every keyless record
        named in ``record_errors`` as Kafka's LogValidator does, up to the walk's
        :data:`~logtrove.records.walk.MAX_KEYLESS_REPORTED` (the message gives the
        whole count)."""
        view = memoryview(data)
        limit = decompressed_limit(self.config.max_message_bytes)
        for pos, header in batches:
            keyless = check_records(view[pos : pos + header.size], header, limit)
            if keyless.total and self.config.compact:
                raise self._keyless_refused(keyless, header.record_count)

    def _keyless_refused(self, keyless: Keyless, records: int) -> InvalidRecordError:
        why = f"Compacted topic cannot accept message without key in topic partition {self.tp}."
        named = "" if len(keyless.indexes) == keyless.total else f", the first {len(keyless.indexes)} named"
        return InvalidRecordError(
            f"{self.tp.topic} is a compacted topic (cleanup.policy={self.config.cleanup_policy}): "
            f"every record needs a key; {keyless.total} of the batch's {records} have none "
            f"(the first at batch offset +{keyless.indexes[0]}{named})",
            tuple((i, why) for i in keyless.indexes),
        )

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
        with self._lock:
            base = self.log_end_offset if base_offset is None else base_offset
            old = self.active
            if old.size == 0 and old.base_offset == base:
                return old
            if old.size == 0:  # an empty segment left in the middle would be dropped on reopen
                self._remove_from_list(old)
                old.delete_files()
            else:
                old.seal()
            seg = Segment.create(self.directory, base, index_interval_bytes=self.config.index_interval_bytes)
            seg.created_ms = self.clock.now_ms()
            self._add_segment(seg)
            if self.roll_listener is not None and old.size:
                self.roll_listener(old, seg)
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            return seg

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
            with self._lock:
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
            with self._lock:
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

    # -- reading --------------------------------------------------------------------
    def _check_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.tp}: "
                f"valid offsets are [{self.log_start_offset}, {self.log_end_offset}]",
                log_start_offset=self.log_start_offset,
                log_end_offset=self.log_end_offset,
            )

    def _locate(self, offset: int) -> tuple[Segment, int, BatchHeader] | None:
        """The segment and batch holding ``offset``, or the next surviving batch."""
        segments = self.segments
        i = max(bisect.bisect_right([s.base_offset for s in segments], offset) - 1, 0)
        for seg in segments[i:]:
            found = seg.find(offset)
            if found is not None:
                return seg, found[0], found[1]
        return None

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> ReadResult:
        """Whole batches from one segment, starting with the batch holding ``offset``
        (or the next surviving one), up to ``max_bytes`` but always at least one batch.
        With ``max_offset`` (the last stable offset of a read_committed fetch) only the
        batches that begin below it, and none if the first does not.

        ``offset == log end offset`` gives an empty result; outside
        ``[log start, log end]`` raises :class:`OffsetOutOfRangeError`.
        """
        self._check_offset(offset)
        start, end = self.log_start_offset, self.log_end_offset
        limit = end if max_offset is None else min(end, max_offset)
        located = self._locate(offset) if offset < limit else None
        if located is None or located[2].base_offset >= limit:
            return ReadResult(None, None, start, end)
        seg, position, header = located
        stop = seg.batch_end_before(position, position + max(max_bytes, 0))
        upper = None
        if max_offset is not None:
            if limit < end:
                beyond = seg.find(limit, stop)
                if beyond is not None and beyond[1].base_offset >= limit:
                    stop = min(stop, beyond[0])
            after = next(seg.batches(stop), None)
            upper = min(after[1].base_offset, limit) if after is not None else limit
        return ReadResult(FileSlice(seg, position, stop - position), header.base_offset, start, end, upper)

    def batches(
        self, start_offset: int = 0, end_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, bytes) of each batch holding offsets in ``[start_offset, end_offset)``,
        from the log start offset on. For readers off the hot path."""
        begin = max(start_offset, self.log_start_offset)
        located = self._locate(begin)
        if located is None:
            return
        first_seg, position, _ = located
        for seg in self.segments:
            if seg.base_offset < first_seg.base_offset:
                continue
            for pos, header in seg.batches(position if seg is first_seg else 0):
                if end_offset is not None and header.base_offset >= end_offset:
                    return
                yield header, seg.read(pos, header.size)

    def records(self, start_offset: int = 0, end_offset: int | None = None) -> Iterator[Record]:
        """Decoded records with offsets in ``[max(start, log start), end_offset)``."""
        begin = max(start_offset, self.log_start_offset)
        for header, data in self.batches(begin, end_offset):
            for record in iter_records(data, 0, header):
                if record.offset < begin:
                    continue
                if end_offset is not None and record.offset >= end_offset:
                    return
                yield record

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record (in offset order, from the log start) whose timestamp is
        ≥ ``timestamp``; ``None`` if there is none."""
        start = self.log_start_offset
        for seg in self.segments:
            if seg.max_timestamp < timestamp or seg.next_offset <= start:
                continue
            found = seg.find_timestamp(timestamp, start)
            while found is not None:
                position, header = found
                record = first_stamped(seg.read(position, header.size), header, start, timestamp)
                if record is not None:
                    return TimestampOffset(record.offset, record.timestamp)
                found = seg.find_timestamp(timestamp, header.next_offset)
        return None

    def max_timestamp_offset(self) -> TimestampOffset | None:
        """The first record carrying the largest timestamp of the visible log (ListOffsets
        -3); records below the log start offset do not count."""
        start = self.log_start_offset
        best = -1
        for seg in self.segments:
            if seg.next_offset <= start:
                continue
            if seg.base_offset >= start or seg.max_timestamp_offset >= start:
                best = max(best, seg.max_timestamp)  # the batch reaching it is visible
            else:
                best = max(best, self._max_timestamp_from(seg, start))
        return self.offset_for_timestamp(best) if best >= 0 else None

    @staticmethod
    def _max_timestamp_from(seg: Segment, start: int) -> int:
        """Largest timestamp of the records of ``seg`` at offsets ≥ ``start`` (a walk of
        batch headers; only the batch holding ``start`` is decoded)."""
        found = seg.find(start)
        best = -1
        for position, header in seg.batches(found[0]) if found else ():
            if header.base_offset >= start:
                best = max(best, header.max_timestamp)
                continue
            for record in iter_records(seg.read(position, header.size), 0, header):
                if record.offset >= start:
                    best = max(best, record.timestamp)
        return best

    # -- retention ------------------------------------------------------------------
    def truncate_before(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start offset (never backwards) and delete
        the segments wholly below it. Returns the new log start offset."""
        if self.read_only:
            raise ReadOnlyError(f"{self.tp} is open read-only")
        with self._lock:
            if offset > self.log_end_offset or offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: the log of {self.tp} ends at {self.log_end_offset}",
                    log_start_offset=self.log_start_offset,
                    log_end_offset=self.log_end_offset,
                )
            self.log_start_offset = max(self.log_start_offset, offset)
            for seg in list(self._segments[:-1]):
                if seg.next_offset <= self.log_start_offset:
                    self._delete_segment(seg)
            return self.log_start_offset

    def follow_log_start(self, offset: int) -> int:
        """A follower's move of the log start to the leader's (its retention or
        DeleteRecords moved it): as :meth:`truncate_before`, but an ``offset`` past the
        log end empties the log, which then restarts there (Kafka's
        ``truncateFullyAndStartAt``), since the records below it are gone at the leader.
        Returns the new log start offset."""
        with self._lock:
            if offset > self.log_end_offset:
                self.roll(offset)
            return self.truncate_before(offset)

    def apply_retention(self) -> list[int]:
        """Delete old segments by ``retention.ms`` and ``retention.bytes`` (never the active
        one; only for topics whose cleanup policy includes delete). Returns deleted bases."""
        if self.read_only or not self.config.delete:
            return []
        deleted: list[int] = []
        now = self.clock.now_ms()
        with self._lock:
            total = sum(s.size for s in self._segments)
            for seg in list(self._segments[:-1]):
                expired = (
                    self.config.retention_ms >= 0
                    and seg.max_timestamp >= 0
                    and now - seg.max_timestamp > self.config.retention_ms
                )
                oversized = (
                    self.config.retention_bytes >= 0 and total - seg.size >= self.config.retention_bytes
                )
                if not (expired or oversized):
                    break
                total -= seg.size
                deleted.append(seg.base_offset)
                self._delete_segment(seg)
            if deleted:
                self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        return deleted

    def _delete_segment(self, seg: Segment) -> None:
        """Unlist a segment and rename its files to ``.deleted``; it stays open for
        ``file.delete.delay.ms`` so in-flight readers can finish."""
        self._remove_from_list(seg)
        seg.rename_suffix(DELETED_SUFFIX)
        self._graveyard.append((self.clock.now_ms() + self.config.file_delete_delay_ms, seg))

    def purge_deleted(self, *, force: bool = False) -> int:
        """Close and unlink deleted segments whose delay has passed. Returns how many.
        A read-only opening only closes them: the files are the writer's (its graveyard
        also holds segments it merely reopened, whose files are live)."""
        now = self.clock.now_ms()
        with self._lock:
            due = [(t, s) for t, s in self._graveyard if force or t <= now]
            self._graveyard = [(t, s) for t, s in self._graveyard if not (force or t <= now)]
        for _, seg in due:
            if self.read_only:
                seg.close()
            else:
                seg.delete_files()
        return len(due)

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
        with self._lock:
            listed = self._segments
            if old[0] not in listed:
                raise SegmentsChangedError(f"{self.tp}: segments changed while they were being cleaned")
            first = listed.index(old[0])
            if listed[first : first + len(old)] != old or old[-1] is self.active:
                raise SegmentsChangedError(f"{self.tp}: segments changed while they were being cleaned")
            swap_in(self.directory, new, old, fault or (lambda step: None))
            del self._segments[first : first + len(old)]
            del self._bases[first : first + len(old)]
            self._segments.insert(first, new)
            self._bases.insert(first, new.base_offset)
            self.rewrites += 1
            due = self.clock.now_ms() + self.config.file_delete_delay_ms
            self._graveyard.extend((due, seg) for seg in old)

    # -- read-only refresh ------------------------------------------------------------
    def refresh(self, log_start_offset: int | None = None) -> None:
        """For read-only openings: pick up segments and batches the writer added since,
        and drop segments it deleted."""
        if not self.read_only:
            return
        with self._lock:
            for _attempt in range(_REFRESH_ATTEMPTS):
                if self._refresh_segments():
                    break
            self.purge_deleted()
            if log_start_offset is not None:
                self.log_start_offset = max(self.log_start_offset, log_start_offset)
            if self._segments:
                self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)

    def _refresh_segments(self) -> bool:
        """One pass of :meth:`refresh` over a directory listing. False when a listed
        segment was gone by the time it was opened: the writer rolled and deleted it
        meanwhile, so the listing misses newer segments and must be taken again (else
        the log end offset would go back)."""
        on_disk = set(self._segment_bases())
        for seg in list(self._segments):
            if seg.base_offset not in on_disk or not seg.is_current_file():
                self._remove_from_list(seg)
                self._graveyard.append((self.clock.now_ms() + 60_000, seg))
        known = set(self._bases)
        if self._segments and self._segments[-1].file_size() != self._segments[-1].size:
            # reopen the last segment: it has grown (a fresh object, so that a thread
            # reading the old one is not disturbed; the old one stays open a while)
            last = self._segments.pop()
            self._bases.pop()
            self._graveyard.append((self.clock.now_ms() + 60_000, last))
            known.discard(last.base_offset)
        complete = True
        for base in sorted(on_disk - known):
            opened = self._open_listed_segment(base, recover=False)
            if opened is None:
                complete = False
            else:
                self._add_segment(opened)
        self._segments.sort(key=lambda s: s.base_offset)
        self._bases = [s.base_offset for s in self._segments]
        return complete

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        """Flush (writers, the active segment's indexes included) and close every file."""
        if not self.read_only:
            self.flush()
            with self._lock:
                unsynced = dict.fromkeys(
                    s for s in [*self._segments[-1:], self._indexes_unsynced] if s is not None
                )
            for seg in unsynced:
                seg.flush()
        with self._lock:
            for seg in self._segments:
                seg.close()
        self.purge_deleted(force=not self.read_only)
        for _, seg in self._graveyard:
            seg.close()

    def abandon(self) -> None:
        """Close every file without flushing, as a crash would (tests)."""
        with self._lock:
            for seg in [*self._segments, *(s for _, s in self._graveyard)]:
                seg.abandon()

    def delete_files(self) -> None:
        """Close and remove the partition's files (topic deletion)."""
        with self._lock:
            for seg in self._segments:
                seg.delete_files()
            self._segments.clear()
            self._bases.clear()
        self.purge_deleted(force=True)

    def __repr__(self) -> str:
        return f"PartitionLog({self.tp}, start={self.log_start_offset}, end={self.log_end_offset})"
