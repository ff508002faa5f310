"""One segment of a partition log: a ``.log`` file of batches and its two sparse indexes.

Files, named by the segment's base offset zero-padded to 20 digits
(:mod:`logtrove.storage.segmentnames`)::

    00000000000000001234.log        RecordBatch v2 batches back to back, offsets ≥ 1234
    00000000000000001234.index      sparse offset index (see storage.index)
    00000000000000001234.timeindex  sparse time index  (see storage.index)

    .log:  ┌─────────── batch ───────────┬─────────── batch ───────────┬ …
           │ baseOffset │ batchLength │ … │ baseOffset │ batchLength │ … │
           └─────────────────────────────┴─────────────────────────────┴ …

Invariants:

* Batches are whole and valid (CRC32C) up to ``size``; base offsets strictly increase,
  every batch starts at or after the previous batch's next offset (gaps exist only after
  compaction), and all offsets are within ``[base_offset, base_offset + 2**32)``.
* ``next_offset`` is the next offset after the last batch (``base_offset`` when empty).
* Index entries are written every ``index.interval.bytes`` of appended log. Indexes are
  derived: when they fail their check (:mod:`logtrove.storage.segmentcheck`) they are
  rebuilt from the log.

The ``.log`` file is opened lazily through the process's file pool
(:mod:`logtrove.storage.files`): a segment being written keeps its descriptor until it is
sealed, the others hold one only while they are read or in the pool's LRU.

A writer opens a segment read-write; recovery (:meth:`Segment.recover`) re-validates
every batch, truncates a torn tail and rebuilds both indexes. Readers open read-only and
treat the first incomplete or invalid batch as the end: the writer may be mid-append.
The walks over the ``.log`` file (by headers, in large reads, fully validated) are
:mod:`logtrove.storage.segmentscan`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from logtrove.records import BatchHeader, CorruptBatchError, RecordsError
from logtrove.storage.checkpoint import fsync_if_exists
from logtrove.storage.errors import CorruptIndexError
from logtrove.storage.files import FILE_POOL, SegmentFile
from logtrove.storage.index import OffsetIndex, TimeIndex
from logtrove.storage.segmentcheck import check_indexes
from logtrove.storage.segmentnames import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    derived_files,
    segment_file_name,
    swap_suffix,
)
from logtrove.storage.segmentscan import (
    RELATIVE_OFFSET_LIMIT,
    SPAN_CHUNK,
    SPAN_FIRST_READ,
    Span,
    walk_headers,
    walk_spans,
    walk_valid,
)


class Segment:
    """A ``.log`` file plus its offset and time indexes.

    Not thread-safe for writers; the owning :class:`PartitionLog` serialises appends and
    structural changes. Reads (``pread``) may run concurrently with an append.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        read_only: bool,
        file_suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.read_only = read_only
        self.index_interval_bytes = index_interval_bytes
        self.file_suffix = file_suffix
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self.offset_index = OffsetIndex(
            directory / (segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix), base_offset
        )
        self.time_index = TimeIndex(
            directory / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix), base_offset
        )
        self._file = SegmentFile(FILE_POOL, self.log_path, read_only=read_only)
        stat = self._file.fstat()  # opens (creates, for a writer) the file; then it is pooled
        self.size = stat.st_size
        self.inode = stat.st_ino
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.max_timestamp_offset = base_offset
        self.first_batch_timestamp: int | None = None
        self.created_ms: int | None = None
        self._bytes_since_index = 0
        self._closed = False
        self.truncated_bytes = 0  # cut from the end of the file by the last recovery
        self._tail: tuple[int, BatchHeader] | None = None  # last batch a read-only view saw

    # -- opening ------------------------------------------------------------------
    @classmethod
    def create(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int, file_suffix: str = ""
    ) -> Segment:
        """A new empty segment (files created now). ``file_suffix`` (e.g. ``.cleaned``)
        is appended to every file name, for segments being built by the cleaner."""
        seg = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            read_only=False,
            file_suffix=file_suffix,
        )
        seg.offset_index.rewrite([])
        seg.time_index.rewrite([])
        return seg

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int, read_only: bool, recover: bool
    ) -> Segment:
        """Open an existing segment.

        ``recover`` re-validates every batch (after an unclean shutdown). Otherwise the
        indexes are loaded and checked, and rebuilt if they fail the check; only the tail
        after the last index entry is walked, to find the next offset and max timestamp.
        """
        seg = cls(directory, base_offset, index_interval_bytes=index_interval_bytes, read_only=read_only)
        if recover and not read_only:
            seg.recover()
            return seg
        try:
            seg._load_indexes(strict=not read_only)
        except (CorruptIndexError, RecordsError):
            if read_only:
                seg.offset_index.load(0, strict=False)
                seg.time_index.load(0, strict=False)
                seg._scan_tail()
            else:
                seg.recover()
        return seg

    def _load_indexes(self, *, strict: bool) -> None:
        self.offset_index.load(self.size, strict=strict)
        self._scan_tail()
        self.time_index.load(self.next_offset, strict=strict)
        if strict:
            check_indexes(self)
        last = self.time_index.last_entry
        if last is not None and last[0] >= self.max_timestamp:  # on a tie the entry is first
            self.max_timestamp, self.max_timestamp_offset = last

    def _scan_tail(self) -> None:
        """Set next offset, max timestamp and first batch timestamp from the time index
        (when loaded) plus a walk of the batches after the last offset-index entry."""
        last = self.time_index.last_entry
        if last is not None:
            self.max_timestamp, self.max_timestamp_offset = last
        else:
            self.max_timestamp, self.max_timestamp_offset = -1, self.base_offset
        while True:
            _, start = self.offset_index.lookup(2**63 - 1)
            self.next_offset = self.base_offset
            end = start
            self._tail = None
            for position, header in self.batches(start):
                self._observe(header)
                end = position + header.size
                self._tail = position, header
            if end > start or start == 0 or not self.read_only:
                break
            # A live writer's batch was cut by our size snapshot (the writer's write was
            # in flight at fstat time) but its index entry was already there when the
            # index was read: walk again from the entry before it, or the segment would
            # seem to end at its base offset.
            self.offset_index.forget_from_position(start)
        if self.read_only:
            self.size = end
        elif end < self.size:
            raise CorruptBatchError(f"{self.log_path.name}: invalid bytes after position {end}")
        first = next(self.batches(0), None)
        self.first_batch_timestamp = first[1].max_timestamp if first else None

    def _observe(self, header: BatchHeader) -> None:
        self.next_offset = header.next_offset
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.max_timestamp_offset = header.base_offset

    def extend_read_only(self) -> bool:
        """Follow the writer's appends in place (a read-only view's refresh): walk the
        batches after ``size`` by their headers, stopping at the first incomplete or
        invalid one as :meth:`batches` does and at offsets that do not increase as
        recovery does, then add the index entries the writer wrote for them (only the
        files' tails are read). True when done (also when nothing grew, or only a torn
        batch did); False when the file is not this one grown: replaced (another inode),
        shrunk, or rewritten under the view (the last batch seen is gone, an index file
        was rewritten or names a new batch the walk did not find). The caller then opens
        the segment afresh, the cost this saves: reading both indexes whole.

        Other threads may be reading this object: index entries are added first (they
        name batches past ``size``, which no reader asks for yet), then ``size``, then
        the offsets, so a reader never sees an offset below ``next_offset`` that is not
        within ``size``."""
        try:
            stat = self.log_path.stat()
        except FileNotFoundError:
            return False
        if stat.st_ino != self.inode or stat.st_size < self.size:
            return False
        if stat.st_size == self.size:
            return True
        if self._tail is not None and next(self.batches(self._tail[0]), None) != self._tail:
            return False  # truncated in place and written again since the last refresh
        walked: dict[int, int] = {}
        headers: list[BatchHeader] = []
        next_offset, end, tail = self.next_offset, self.size, self._tail
        for position, header in self.batches(self.size, stat.st_size):
            if (
                header.base_offset < next_offset
                or header.last_offset - self.base_offset > RELATIVE_OFFSET_LIMIT
            ):
                break
            walked[position] = header.base_offset
            headers.append(header)
            next_offset, end, tail = header.next_offset, position + header.size, (position, header)
        if not headers:
            return True
        if not self.offset_index.extend_read_only(walked, self.size, end):
            return False
        if not self.time_index.extend_read_only(next_offset):
            return False
        self.size = end
        for header in headers:
            self._observe(header)
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = headers[0].max_timestamp
        last = self.time_index.last_entry
        if last is not None and last[0] >= self.max_timestamp:  # as _load_indexes does
            self.max_timestamp, self.max_timestamp_offset = last
        self._tail = tail
        return True

    def file_size(self) -> int | None:
        """Size of the file ``log_path`` names now (``None`` if it is gone)."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return None

    def is_current_file(self) -> bool:
        """Whether ``log_path`` still names the file this segment has open (a cleaner swap
        replaces a segment by a new file of the same name)."""
        try:
            return self.log_path.stat().st_ino == self.inode
        except FileNotFoundError:
            return False

    # -- writing ------------------------------------------------------------------
    def append(
        self, header: BatchHeader, data: bytes | bytearray | memoryview, *, patched_prefix: bytes = b""
    ) -> int:
        """Append one batch already validated and given its offsets; return its position.

        When ``patched_prefix`` is given it replaces the first ``len(patched_prefix)``
        bytes of ``data`` (the base offset), so the caller's buffer is never copied.
        """
        position = self.size
        self._file.keep()  # the partition writes here: no pool round trip per append
        if patched_prefix:
            view = memoryview(data)
            written = self._file.pwritev([patched_prefix, view[len(patched_prefix) :]], position)
        else:
            written = self._file.pwritev([data], position)
        if written != header.size:
            raise OSError(f"short write to {self.log_path.name}: {written} of {header.size} bytes")
        self._account(header, position)
        return position

    def can_hold(self, header: BatchHeader, next_base_offset: int, segment_bytes: int) -> bool:
        """Whether a batch of this size, starting at ``next_base_offset``, may go here."""
        if self.size > 0 and self.size + header.size > segment_bytes:
            return False
        return next_base_offset + header.last_offset_delta - self.base_offset <= RELATIVE_OFFSET_LIMIT

    def seal(self) -> None:
        """The segment stops being active: write the final time-index entry."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
        self.offset_index.flush()
        self.time_index.flush()
        self._file.unkeep()  # its descriptor goes back to the pool (see storage.files)

    def flush(self, *, fsync_indexes: bool = True) -> None:
        """fsync the log and both indexes. Without ``fsync_indexes`` the indexes' queued
        entries are only written to the OS (readers see them), not fsynced: for the last
        segment of a log, which recovery after an unclean shutdown re-validates and
        re-indexes anyway, so its index fsyncs would buy nothing."""
        if self.read_only or self._closed:
            return
        self._file.fsync()
        for index in (self.offset_index, self.time_index):
            if fsync_indexes:
                index.fsync()
            else:
                index.flush()
        if fsync_indexes:  # the transaction files (storage.txnindex), when there are some
            for suffix in (".txnindex", ".snapshot"):
                fsync_if_exists(
                    self.directory / (segment_file_name(self.base_offset, suffix) + self.file_suffix)
                )

    # -- reading ------------------------------------------------------------------
    def read(self, position: int, size: int) -> bytes:
        """``size`` bytes from ``position`` (fewer at the end of the file)."""
        return self._file.pread(size, position)

    def read_into(self, buf: bytearray | memoryview, position: int) -> int:
        """Fill ``buf`` from ``position`` (fewer bytes at the end of the file): how many
        bytes were read. For readers that reuse one buffer per lookup."""
        return self._file.preadv(buf, position)

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch in ``[start, end)``, by headers only.

        Stops at the first batch that is incomplete or has a bad header: for a writer that
        is the end of the data (recovery has run); for a reader the writer may be mid-append.
        """
        yield from walk_headers(self._file, start, self.size if end is None else end)

    def spans(
        self,
        start: int = 0,
        end: int | None = None,
        *,
        first_read: int = SPAN_FIRST_READ,
        max_read: int = SPAN_CHUNK,
    ) -> Iterator[Span]:
        """Each whole batch in ``[start, end)`` (to the file's end by default) as a
        :class:`~logtrove.storage.segmentscan.Span`: the file read once, in reads growing
        4× from ``first_read`` to ``max_read`` bytes (more for a larger batch, read whole).
        A full scan reads each byte once, where :meth:`batches` and :meth:`read` would read
        it twice and make one ``bytes`` per batch; a lookup that stops early reads little.
        The batches end where :meth:`batches` ends them (the first incomplete batch or bad
        header). A buffer is shared by the batches it holds."""
        stop = self.size if end is None else end
        return walk_spans(self._file, start, stop, first_read=first_read, max_read=max_read)

    def find(self, offset: int, end: int | None = None) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is ≥ ``offset``: the batch holding it, or the
        next surviving batch if compaction removed it. ``None`` past the end."""
        _, start = self.offset_index.lookup(offset)
        for position, header in self.batches(start, end):
            if header.last_offset >= offset:
                return position, header
        return None

    def find_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch at or after ``start_offset`` whose max timestamp is ≥ ``timestamp``."""
        hint = self.time_index.lookup_before(timestamp)
        from_offset = max(start_offset, hint if hint is not None else self.base_offset)
        _, start = self.offset_index.lookup(from_offset)
        for position, header in self.batches(start):
            if header.last_offset >= start_offset and header.max_timestamp >= timestamp:
                return position, header
        return None

    def batch_end_before(self, position: int, limit: int) -> int:
        """End of the last whole batch that fits in ``[position, limit]``, found with the
        offset index and a short walk; at least the end of the batch at ``position``
        (a read always returns one whole batch, however large)."""
        floor = self.offset_index.position_floor(limit)
        start = floor if floor is not None and floor > position else position
        end = start if start > position else None
        for pos, header in self.batches(start):
            stop = pos + header.size
            if stop > limit:
                if end is None:
                    end = stop
                break
            end = stop
        return end if end is not None else position

    # -- recovery -----------------------------------------------------------------
    def recover(self) -> int:
        """Re-validate every batch, truncate at the first invalid or incomplete one and
        rebuild both indexes. Returns the number of bytes truncated."""
        self.offset_index.rewrite([])
        self.time_index.rewrite([])
        self.offset_index.load(0, strict=False)
        self.time_index.load(0, strict=False)
        self.next_offset = self.base_offset
        self.max_timestamp, self.max_timestamp_offset = -1, self.base_offset
        self.first_batch_timestamp = None
        self._bytes_since_index = 0
        file_size = self._file.fstat().st_size
        self.size = 0
        for position, header in walk_valid(self._file, file_size, self.base_offset):
            self.size = position
            self._account(header, position)
        truncated = file_size - self.size
        if truncated:
            self._file.ftruncate(self.size)
        self.truncated_bytes = truncated
        self.offset_index.flush()
        self.time_index.flush()
        return truncated

    def _account(self, header: BatchHeader, position: int) -> None:
        """Record a batch now in the file at ``position``: offsets, max timestamp and,
        every ``index.interval.bytes``, an offset-index and a time-index entry."""
        index_due = self._bytes_since_index > self.index_interval_bytes
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        self._observe(header)
        if index_due:
            self.offset_index.append(header.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size
        self.size = position + header.size

    def truncate_to_offset(self, offset: int) -> None:
        """Drop every batch whose base offset is ≥ ``offset`` (whole batches only)."""
        cut = None
        for position, header in self.batches(self.offset_index.lookup(offset)[1]):
            if header.base_offset >= offset:
                cut = position
                break
        if cut is None:
            return
        self._file.ftruncate(cut)
        self.offset_index.truncate_to_position(cut)
        self.time_index.truncate_to_offset(offset)
        self.size = cut
        self._scan_tail()

    # -- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self.read_only:
            self.offset_index.close()
            self.time_index.close()
        self._file.close()

    def derived_files(self) -> list[Path]:
        """Other files of this segment (``.keyidx``, ``.tagidx``, ``.skip``, …) written by
        the indexer: they share the base-offset prefix and the segment's current file
        suffix, and follow the segment's renames."""
        own = {self.log_path, self.offset_index.path, self.time_index.path}
        return derived_files(self.directory, self.base_offset, self.file_suffix, own)

    def abandon(self) -> None:
        """Close the files as a crash would: queued index entries are lost (tests)."""
        if self._closed:
            return
        self._closed = True
        for index in (self.offset_index, self.time_index):
            index._pending.clear()
            index.close()
        self._file.close()

    def rename_suffix(self, suffix: str) -> None:
        """Give every file of the segment the suffix ``suffix`` (``.deleted``, ``.swap``, or
        ``""`` for the final names), replacing its current one. The ``.log`` file is
        renamed last: its name is what recovery goes by."""
        old = self.file_suffix
        for derived in self.derived_files():
            with contextlib.suppress(FileNotFoundError):
                derived.rename(derived.with_name(swap_suffix(derived.name, old, suffix)))
        for path_owner in (self.offset_index, self.time_index):
            path_owner.rename(path_owner.path.with_name(swap_suffix(path_owner.path.name, old, suffix)))
        new_log = self.log_path.with_name(swap_suffix(self.log_path.name, old, suffix))
        with contextlib.suppress(FileNotFoundError):
            self.log_path.rename(new_log)
        self.log_path = self._file.path = new_log
        self.file_suffix = suffix

    def delete_files(self) -> None:
        """Close and unlink every file of the segment, derived ones included."""
        derived = self.derived_files()
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path, *derived):
            path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"Segment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
