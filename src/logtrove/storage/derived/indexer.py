"""The indexer: follows partition logs and writes each segment's derived files.

For every segment it appends blocks (:mod:`.blockfile`) to three files that always move
together: ``.tagidx`` (:mod:`.tagindex`), ``.skip`` (:mod:`.skipindex`) and, last,
``.keyidx`` (:mod:`.keyindex`). A segment's indexed prefix is the longest run of blocks
the three files agree on; anything after it (a crash mid-flush, a corrupt block) is cut
off and indexed again. Nothing needs the checkpoint to be right: the files describe
themselves. ``index-offset-checkpoint`` records, per partition, the offset below which
every segment is indexed, for operators and for lag (issue 6).

Work is per batch, off the produce path: :class:`PartitionIndexer.step` reads batches
with ``pread`` (appends are never blocked) and hands each one to a
:class:`~.blockentries.Pending`, compiled when available, which parses only what the
indexes need: the key, the ID / tag / indexed headers, the timestamp and the tokens of
the value. A block is written every ``block_records`` records, when a segment is sealed, or when asked to flush the tail;
queries scan whatever is not in a block yet. :class:`Indexer` runs the steps of every
partition of a :class:`~logtrove.storage.store.Storage` in one background thread.

A segment replaced by the cleaner (another inode under the same name) gets a new
builder; the cleaner may write the new segment's files itself with
:func:`build_segment_indexes`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

from logtrove.records import BatchHeader, RecordsError
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE
from logtrove.records.compression import decompressed_limit
from logtrove.records.record import batch_payload
from logtrove.storage import PartitionLog, Segment, Storage, TopicConfig, TopicPartition
from logtrove.storage.checkpoint import INDEX_OFFSET, CheckpointFile
from logtrove.storage.derived import keyindex, skipindex, tagindex
from logtrove.storage.derived.blockentries import new_pending
from logtrove.storage.derived.blockfile import encode_block, read_blocks, valid_length
from logtrove.storage.derived.paths import FILES, derived_path
from logtrove.storage.derived.views import common_blocks

log = logging.getLogger(__name__)

DEFAULT_BLOCK_RECORDS = 65_536
_READ_CHUNK = 1024 * 1024


class SegmentIndexBuilder:
    """Indexes one segment incrementally: parse batches into pending entries, then
    append one block to each derived file."""

    def __init__(self, segment: Segment, config: TopicConfig, *, fresh: bool = False) -> None:
        self.segment = segment
        self.inode = segment.inode
        self.id_name = config.message_id_header.encode("utf-8")
        self.tag_name = config.message_tag_header.encode("utf-8")
        self.header_names = tuple(config.indexed_headers)
        self.decompressed_limit = decompressed_limit(config.max_message_bytes)
        self._indexed = {n.encode("utf-8"): b"h:" + n.encode("utf-8") + b":" for n in self.header_names}
        self.names = (config.message_id_header, *self.header_names)
        self.paths = {kind: derived_path(segment, suffix) for kind, suffix in FILES}
        if fresh:
            for path in self.paths.values():
                path.unlink(missing_ok=True)
        blocks = common_blocks(segment)
        for kind, path in self.paths.items():
            if path.exists() and path.stat().st_size != valid_length(blocks[kind]):
                log.info("%s: cutting an unfinished or corrupt tail", path.name)
                os.truncate(path, valid_length(blocks[kind]))
        last = blocks[keyindex.KIND][-1] if blocks[keyindex.KIND] else None
        self.end_offset = last.end_offset if last else segment.base_offset
        self.end_position = last.end_position if last else 0
        self.blocks_written = len(blocks[keyindex.KIND])
        self._reset_pending()

    def _reset_pending(self) -> None:
        self.pending_end_offset = self.end_offset
        self.pending_end_position = self.end_position
        self._pending = new_pending(self.id_name, self.tag_name, self._indexed)

    @property
    def pending_records(self) -> int:
        """Records parsed into the pending block."""
        return self._pending.records

    @property
    def up_to_date(self) -> bool:
        return self.pending_end_position >= self.segment.size

    # -- parsing ----------------------------------------------------------------------
    def index(self, max_records: int) -> int:
        """Parse batches after the pending position (up to the segment's current size)
        until about ``max_records`` records; returns how many were parsed."""
        done = 0
        if max_records <= 0:
            return done
        spans = self.segment.spans(self.pending_end_position, first_read=_READ_CHUNK, max_read=_READ_CHUNK)
        for span in spans:
            done += self._index_batch(span.buffer, span.at, span.header)
            self.pending_end_offset = span.header.next_offset
            self.pending_end_position = span.position + span.header.size
            if done >= max_records:
                break
        return done

    def _index_batch(self, buf: bytes, pos: int, header: BatchHeader) -> int:
        if header.is_control or header.record_count == 0:
            return 0
        append_ts = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
        try:
            payload = batch_payload(buf, header, pos, self.decompressed_limit)
            rel_base = header.base_offset - self.segment.base_offset
            return self._pending.add(payload, rel_base, header.base_timestamp, append_ts)
        except (RecordsError, ValueError) as exc:
            log.warning(
                "%s: batch at offset %d not indexed: %s", self.segment.log_path.name, header.base_offset, exc
            )
            return 0

    # -- writing ----------------------------------------------------------------------
    def flush(self) -> bool:
        """Append one block to each file for everything pending. False if nothing was."""
        if self.pending_end_position <= self.end_position:
            return False
        if not self.segment.is_current_file():
            return False  # replaced by the cleaner: its new segment gets its own builder
        start, end, end_pos = self.end_offset, self.pending_end_offset, self.pending_end_position
        pending = self._pending
        count = pending.records
        min_ts, max_ts = (pending.min_ts, pending.max_ts) if count else (-1, -1)
        payloads = {
            tagindex.KIND: tagindex.encode_payload(
                self.tag_name.decode(), pending.tag_entries(), pending.tag_counts()
            ),
            skipindex.KIND: skipindex.encode_summary(count, min_ts, max_ts, *pending.bloom()),
            keyindex.KIND: keyindex.encode_names(self.names) + pending.key_table(),
        }
        for kind, _suffix in FILES:  # the key index last: it completes the block
            block = encode_block(kind, start, end, end_pos, payloads[kind])
            fd = os.open(self.paths[kind], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, block)
            finally:
                os.close(fd)
        self.end_offset, self.end_position = end, end_pos
        self.blocks_written += 1
        self._reset_pending()
        return True


def build_segment_indexes(segment: Segment, config: TopicConfig) -> None:
    """Write a complete, fresh set of derived files for ``segment`` (for example a
    ``.cleaned`` segment before it is swapped in), replacing any it has."""
    builder = SegmentIndexBuilder(segment, config, fresh=True)
    while not builder.up_to_date:
        before = builder.pending_end_position
        builder.index(DEFAULT_BLOCK_RECORDS)
        if builder.pending_records >= DEFAULT_BLOCK_RECORDS:
            builder.flush()
        if builder.pending_end_position == before:
            break  # the rest is not a whole batch
    builder.flush()


def in_older_layout(segment: Segment) -> bool:
    """Whether ``segment``'s key index holds blocks of an older layout (chained entries,
    before :data:`~.keyindex.GROUPED_VERSION`): still read, but slower to probe where many
    values share a slot; :func:`build_segment_indexes` writes them afresh."""
    blocks = read_blocks(
        derived_path(segment, keyindex.SUFFIX), keyindex.KIND, segment.base_offset, verify=False
    )
    return any(block.version < keyindex.GROUPED_VERSION for block in blocks)


class PartitionIndexer:
    """Keeps the derived files of one partition's segments up to date."""

    def __init__(self, log: PartitionLog, *, block_records: int = DEFAULT_BLOCK_RECORDS) -> None:
        self.log = log
        self.block_records = block_records
        self._builders: dict[int, SegmentIndexBuilder] = {}

    def _builder(self, seg: Segment) -> SegmentIndexBuilder:
        b = self._builders.get(seg.base_offset)
        if b is not None and b.inode == seg.inode:
            b.segment = seg  # a read-only refresh reopens the same file: keep what is pending
        else:
            b = SegmentIndexBuilder(seg, self.log.config)
            self._builders[seg.base_offset] = b
        return b

    def step(self, max_records: int = 1_000_000, *, flush_tail: bool = False) -> int:
        """Index up to about ``max_records`` more records; returns how many. A block is
        written per ``block_records``, at the end of sealed segments, and (with
        ``flush_tail``) for whatever of the active segment is pending."""
        segments = self.log.segments
        live = {seg.base_offset for seg in segments}
        for base in [b for b in self._builders if b not in live]:
            del self._builders[base]
        done = 0
        for seg in segments:
            builder = self._builder(seg)
            sealed = seg is not segments[-1]
            while done < max_records and not builder.up_to_date:
                want = min(self.block_records - builder.pending_records, max_records - done)
                before = builder.pending_end_position
                done += builder.index(max(want, 1))
                if builder.pending_records >= self.block_records:
                    builder.flush()
                if builder.pending_end_position == before:
                    break
            if builder.up_to_date and (sealed or flush_tail):
                builder.flush()
            if done >= max_records:
                break
        return done

    def flush_tail(self) -> None:
        for builder in self._builders.values():
            builder.flush()

    def has_backlog(self) -> bool:
        """Whether a segment of the log holds bytes not parsed yet (all of a segment not
        seen yet, or replaced by the cleaner since)."""
        for seg in self.log.segments:
            builder = self._builders.get(seg.base_offset)
            parsed = builder.pending_end_position if builder is not None and builder.inode == seg.inode else 0
            if seg.size > parsed:
                return True
        return False

    @property
    def indexed_offset(self) -> int:
        """The offset below which every segment's records are in written blocks."""
        for seg in self.log.segments:
            builder = self._builders.get(seg.base_offset)
            if builder is None or builder.end_position < seg.size:
                return builder.end_offset if builder is not None else seg.base_offset
        return self.log.log_end_offset


class EventLike(Protocol):
    """A ``threading.Event`` or a ``multiprocessing`` event."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class Indexer:
    """Runs :class:`PartitionIndexer` steps for every partition of a storage.

    ``start()`` runs them in a daemon thread; ``catch_up()`` runs them in the caller's
    thread until everything is indexed (tests, CLI, benchmarks). There must be one writer
    of derived files, as of logs: the storage is open for writing, or (``sole_indexer``)
    read-only in a process the writer started for indexing (:mod:`.process`).
    """

    def __init__(
        self,
        storage: Storage,
        *,
        block_records: int = DEFAULT_BLOCK_RECORDS,
        idle_s: float = 0.2,
        tail_flush_s: float = 5.0,
        monotonic: Callable[[], float] | None = None,
        topics: set[str] | None = None,
        sole_indexer: bool = False,
        defer_s: float = 0.0,
    ) -> None:
        if storage.read_only and not sole_indexer:
            raise ValueError("the indexer needs the data directory open for writing")
        self.storage = storage
        self.topics = topics
        self.block_records = block_records
        self.idle_s = idle_s
        self.tail_flush_s = tail_flush_s
        self._partitions: dict[TopicPartition, PartitionIndexer] = {}
        self._checkpoint = CheckpointFile(storage.path / INDEX_OFFSET)
        self._written: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.records_indexed = 0
        self._now = monotonic or time.monotonic
        self._last_tail_flush = self._now()
        self.checkpoint_s = 1.0
        self._checkpointed_at = -float("inf")
        self.defer_s = min(defer_s, tail_flush_s)
        self._backlog_since: float | None = None  # when run_until first saw unparsed records

    def _partition(self, plog: PartitionLog) -> PartitionIndexer:
        pi = self._partitions.get(plog.tp)
        if pi is None or pi.log is not plog:
            pi = PartitionIndexer(plog, block_records=self.block_records)
            self._partitions[plog.tp] = pi
        return pi

    def run_once(self, max_records: int = 200_000, *, flush_tail: bool = False) -> int:
        """One step over every partition; returns the records indexed."""
        with self._lock:
            done = 0
            if self.storage.read_only:
                self.storage.refresh()
            logs = [lg for lg in self.storage.logs() if self.topics is None or lg.tp.topic in self.topics]
            live = {plog.tp for plog in logs}
            for tp in [tp for tp in self._partitions if tp not in live]:
                del self._partitions[tp]
            for plog in logs:
                done += self._step(plog, max_records, flush_tail)
            self.records_indexed += done
            self.write_checkpoint(force=flush_tail)
            return done

    def _step(self, plog: PartitionLog, max_records: int, flush_tail: bool) -> int:
        """One partition's step; a partition whose directory vanished (its topic was just
        deleted) is dropped, not an error: the next refresh no longer lists it."""
        try:
            return self._partition(plog).step(max_records, flush_tail=flush_tail)
        except FileNotFoundError:
            if plog.directory.is_dir():
                raise
            log.debug("%s vanished (topic deleted); no longer indexed", plog.tp)
            self._partitions.pop(plog.tp, None)
            return 0

    def catch_up(self, *, flush_tail: bool = True) -> int:
        """Index everything there is now; returns the records indexed."""
        total = 0
        while True:
            n = self.run_once(1_000_000, flush_tail=flush_tail)
            total += n
            if n == 0:
                return total

    def indexed_offsets(self) -> dict[tuple[str, int], int]:
        return {(tp.topic, tp.partition): pi.indexed_offset for tp, pi in self._partitions.items()}

    def write_checkpoint(self, *, force: bool = True) -> None:
        """Write ``index-offset-checkpoint`` if it changed (without ``force``, at most
        once per ``checkpoint_s``: each write costs two fsyncs)."""
        if not force and self._now() - self._checkpointed_at < self.checkpoint_s:
            return
        offsets = self.indexed_offsets()
        if offsets != self._written:
            self._checkpoint.write(offsets)
            self._written = offsets
            self._checkpointed_at = self._now()

    # -- background thread --------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="logtrove-indexer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.run_until(self._stop)

    def has_backlog(self) -> bool:
        """Whether any followed partition has records not parsed yet (a read-only storage
        is refreshed first, as :meth:`run_once` does)."""
        with self._lock:
            if self.storage.read_only:
                self.storage.refresh()
            for plog in self.storage.logs():
                if self.topics is not None and plog.tp.topic not in self.topics:
                    continue
                if self._partition(plog).has_backlog():
                    return True
            return False

    def _deferring(self) -> bool:
        """Whether :meth:`run_until` waits instead of parsing now: records arrived less
        than ``defer_s`` ago and the indexer was caught up before them.

        The writer's producers and this indexer share the machine's cores; parsing each
        batch as it lands takes CPU from the producer in the middle of its burst. Waiting
        until the oldest unparsed record is ``defer_s`` old (at most the tail flush
        interval, the resolution at which queries see blocks anyway) lets a burst end
        first and then parses it in large steps; a backlog older than that is parsed at
        once and without pause until caught up, so the lag stays within ``defer_s`` plus
        the time to parse what arrived meanwhile. Queries scan the unindexed tail
        meanwhile, as they always do."""
        if self.defer_s <= 0:
            return False
        if self._backlog_since is None:
            if not self.has_backlog():
                return True  # nothing to parse: wait as an idle step would
            self._backlog_since = self._now()
        return self._now() - self._backlog_since < self.defer_s

    def run_due(self) -> int | None:
        """One round of :meth:`run_until`: the records indexed, or ``None`` when a new
        backlog is left for later (:meth:`_deferring`). The tail is flushed every
        ``tail_flush_s``, deferred or not."""
        flush = self._now() - self._last_tail_flush >= self.tail_flush_s
        if not flush and self._deferring():
            return None
        try:
            n = self.run_once(flush_tail=flush)
        except Exception:  # the indexer must outlive any one bad file; queries scan instead
            log.exception("indexer step failed; retrying")
            n = 0
        if flush:
            self._last_tail_flush = self._now()
        if n == 0:
            self._backlog_since = None
        return n

    def run_until(self, stop: threading.Event | EventLike) -> None:
        """Index until ``stop`` is set, then write pending blocks (with ``defer_s``, a
        new backlog waits that long first: :meth:`_deferring`)."""
        while not stop.is_set():
            n = self.run_due()
            if n is None:
                stop.wait(min(self.idle_s, self.defer_s))
            elif n == 0:
                stop.wait(self.idle_s)
        with self._lock:
            for pi in self._partitions.values():
                pi.flush_tail()
            self.write_checkpoint()

    def stop(self) -> None:
        """Stop the thread and write pending blocks, so a restart resumes from them."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            for pi in self._partitions.values():
                pi.flush_tail()
            self.write_checkpoint()
