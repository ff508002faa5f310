"""The two sparse indexes of a segment: offsets → file positions, and time → offsets.

Both are append-only files of fixed-width big-endian entries, loaded into memory (a
1 GiB segment with the default 4 KiB interval has about 262 k entries, 2 MiB) and
searched with ``bisect``. They are derived data: :meth:`IndexFile.load` checks them
and raises :class:`CorruptIndexError`, and the segment rebuilds them from its log.

Offset index, ``NNNNNNNNNNNNNNNNNNNN.index``::

    ┌────────────────────────┬────────────────────────┐
    │ relative offset   u32  │ position          u32  │  × n, 8 bytes each
    └────────────────────────┴────────────────────────┘

An entry (O, P) means the batch whose base offset is ``segment base + O`` starts at
byte P of the ``.log`` file. Offsets and positions strictly increase.

Time index, ``NNNNNNNNNNNNNNNNNNNN.timeindex``::

    ┌────────────────────────────────────┬────────────────────────┐
    │ max timestamp so far         i64   │ relative offset   u32  │  × n, 12 bytes each
    └────────────────────────────────────┴────────────────────────┘

An entry (T, O) means T is the largest timestamp in the segment up to and including the
batch at relative offset O, and that batch is where T was first reached: every batch
before it has a maximum timestamp below T. Timestamps strictly increase even when client
timestamps do not. Entries are added alongside offset entries (every
``index.interval.bytes`` of log) and once more when a segment is rolled.
"""

from __future__ import annotations

import bisect
import operator
import os
import struct
import sys
import threading
from array import array
from pathlib import Path

from logtrove.storage.errors import CorruptIndexError

_U32_MAX = 2**32 - 1
_LITTLE_ENDIAN = sys.byteorder == "little"


class IndexFile:
    """An append-only file of fixed-width entries, mirrored in memory."""

    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._unsynced = False  # written since the last fsync
        self._pending = bytearray()
        self._pending_lock = threading.Lock()
        self._write_lock = threading.RLock()

    # -- file handling -------------------------------------------------------------
    # No descriptor stays open: entries are queued in memory and written (open, write,
    # close) at a flush, about once per flush.ms for a busy partition, so a broker with
    # thousands of partitions spends no descriptors on indexes (see storage.files).
    def _read_entries(self, *, strict: bool) -> list[tuple[int, ...]]:
        """Entries in the file. ``strict`` rejects a trailing partial entry."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            if strict:
                raise CorruptIndexError(f"{self.path.name} is missing") from None
            return []
        size = self.ENTRY.size
        usable = len(data) - len(data) % size
        if strict and usable != len(data):
            raise CorruptIndexError(f"{self.path.name} ends with a partial entry")
        return list(self.ENTRY.iter_unpack(memoryview(data)[:usable]))

    def read_tail(self, held: int) -> list[tuple[int, ...]] | None:
        """The whole entries of the file after its first ``held`` ones (a read-only view
        extending a grown segment reads only what the writer added). ``None`` when the
        file holds fewer than ``held`` entries or is gone: it was rewritten (truncation)."""
        size = self.ENTRY.size
        try:
            with self.path.open("rb") as f:
                if os.fstat(f.fileno()).st_size < held * size:
                    return None
                f.seek(held * size)
                data = f.read()
        except FileNotFoundError:
            return None
        usable = len(data) - len(data) % size
        return list(self.ENTRY.iter_unpack(memoryview(data)[:usable]))

    def write_entry(self, *values: int) -> None:
        """Queue one entry; it reaches the file at the next :meth:`flush`."""
        with self._pending_lock:
            self._pending += self.ENTRY.pack(*values)
            full = len(self._pending) >= 64 * 1024
        if full:
            self.flush()

    def flush(self) -> None:
        """Write queued entries to the OS.

        The appending thread queues entries while another (the broker's maintenance
        thread) may flush: the queue is swapped out under a short lock, so an append
        never waits for the write and no entry is written twice or lost; the write lock
        keeps concurrent flushes in queue order."""
        with self._write_lock:
            with self._pending_lock:
                data, self._pending = self._pending, bytearray()
            if data:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
                self._unsynced = True

    def fsync(self) -> None:
        """Write queued entries and fsync the file (through a fresh descriptor: fsync
        covers the file's pages whichever descriptor wrote them)."""
        with self._write_lock:
            self.flush()
            if not self._unsynced:
                return
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:  # deleted meanwhile: derived data, nothing to keep
                self._unsynced = False
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._unsynced = False

    def rewrite(self, entries: list[tuple[int, ...]]) -> None:
        """Replace the file with ``entries`` (used by truncation and rebuilds)."""
        self.close()
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_bytes(b"".join(self.ENTRY.pack(*e) for e in entries))
        tmp.replace(self.path)

    def close(self) -> None:
        self.flush()

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        self.flush()
        if self.path.exists():
            self.path.rename(path)
        self.path = path


def _u32_entries(path: Path, width: int) -> array[int] | None:
    """The file's big-endian u32 words, when it holds whole entries of ``width`` words;
    ``None`` when it is missing or ends with a partial entry."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) % (4 * width):
        return None
    words = array("I", data)
    if _LITTLE_ENDIAN:
        words.byteswap()
    return words


class OffsetIndex(IndexFile):
    """Sparse map from batch base offsets to positions in the ``.log`` file."""

    ENTRY = struct.Struct(">II")

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._offsets: array[int] = array("Q")
        self._positions: array[int] = array("Q")

    def __len__(self) -> int:
        return len(self._offsets)

    def load(self, log_size: int, *, strict: bool = True) -> None:
        """Read the file and check it: increasing offsets and positions, positions
        inside the log. In non-strict mode (read-only openings of a live log) a trailing
        partial entry or entries past ``log_size`` are dropped instead of raising."""
        fast = self._load_ordered(log_size)
        if fast is not None:
            self._offsets, self._positions = fast
            return
        offsets: array[int] = array("Q")
        positions: array[int] = array("Q")
        for rel, pos in self._read_entries(strict=strict):
            bad = (
                offsets and (rel <= offsets[-1] - self.base_offset or pos <= positions[-1])
            ) or pos >= log_size
            if bad:
                if strict:
                    raise CorruptIndexError(
                        f"{self.path.name}: entry ({rel}, {pos}) is out of order or past the log"
                    )
                break
            offsets.append(self.base_offset + rel)
            positions.append(pos)
        self._offsets, self._positions = offsets, positions

    def _load_ordered(self, log_size: int) -> tuple[array[int], array[int]] | None:
        """The entries when the file is whole and in order with every position inside
        the log (a reader refreshing a busy segment loads its index at every query):
        read as arrays and checked in bulk. ``None`` otherwise; :meth:`load` then checks
        entry by entry, finding and reporting the first bad one."""
        raw = _u32_entries(self.path, 2)
        if raw is None:
            return None
        rels, positions = raw[0::2], raw[1::2]
        ordered = all(map(operator.lt, rels, rels[1:])) and all(map(operator.lt, positions, positions[1:]))
        if not ordered or (positions and positions[-1] >= log_size):
            return None
        return array("Q", map(self.base_offset.__add__, rels)), array("Q", positions)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must increase."""
        rel = offset - self.base_offset
        if not 0 <= rel <= _U32_MAX:
            raise ValueError(f"offset {offset} does not fit a segment based at {self.base_offset}")
        if self._offsets and (offset <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not increase")
        self._offsets.append(offset)
        self._positions.append(position)
        self.write_entry(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset ≤ ``offset``, as (offset, position).

        If ``offset`` is below the first entry, ``(base_offset, 0)`` is returned: the
        walk starts at the beginning of the log file.
        """
        i = bisect.bisect_right(self._offsets, offset)
        if i == 0:
            return self.base_offset, 0
        return self._offsets[i - 1], self._positions[i - 1]

    def positions_around(self, offset: int) -> tuple[int, int | None]:
        """(position of :meth:`lookup`'s entry, position of the entry after it or ``None``):
        the batches holding offsets up to the next entry's lie between the two, so a
        point read can take exactly that span in one read."""
        i = bisect.bisect_right(self._offsets, offset)
        following = self._positions[i] if i < len(self._positions) else None
        return (self._positions[i - 1] if i else 0), following

    def position_floor(self, position: int) -> int | None:
        """The largest indexed batch position ≤ ``position``: a batch boundary."""
        i = bisect.bisect_right(self._positions, position)
        return self._positions[i - 1] if i else None

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or after ``position`` in the log (the log was truncated there)."""
        keep = bisect.bisect_left(self._positions, position)
        if keep == len(self._positions):
            return
        del self._offsets[keep:]
        del self._positions[keep:]
        self._pending.clear()
        self.rewrite([(o - self.base_offset, p) for o, p in zip(self._offsets, self._positions, strict=True)])

    def extend_read_only(self, walked: dict[int, int], start: int, end: int) -> bool:
        """Add the entries the writer wrote after the ones held (a read-only view
        extending its segment from ``start`` to ``end``). An entry in ``[start, end)``
        must name one of the batches just ``walked`` (position → base offset); one
        before ``start`` names a batch walked by an earlier refresh (the writer queues
        entries until its next flush) and is checked as :meth:`load` checks, by order.
        Entries at or past ``end`` wait for a later refresh. False when the file was
        rewritten or an entry fails its check: the caller reopens the segment."""
        entries = self.read_tail(len(self._offsets))
        if entries is None:
            return False
        for rel, position in entries:
            offset = self.base_offset + rel
            if position >= end:
                break
            if self._offsets and (offset <= self._offsets[-1] or position <= self._positions[-1]):
                return False
            if position >= start and walked.get(position) != offset:
                return False
            self._offsets.append(offset)
            self._positions.append(position)
        return True

    def forget_from_position(self, position: int) -> None:
        """Drop entries at or after ``position`` from memory only, leaving the file alone:
        a read-only opening of a live log whose indexed batch is not all visible yet."""
        keep = bisect.bisect_left(self._positions, position)
        del self._offsets[keep:]
        del self._positions[keep:]

    def entries(self, last: int | None = None) -> list[tuple[int, int]]:
        """All entries (or the ``last`` few) as absolute (offset, position)."""
        start = 0 if last is None else max(len(self._offsets) - last, 0)
        return list(zip(self._offsets[start:], self._positions[start:], strict=True))


class TimeIndex(IndexFile):
    """Sparse map from the running maximum timestamp to the batch where it was reached."""

    ENTRY = struct.Struct(">qI")

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self._timestamps: list[int] = []
        self._offsets: array[int] = array("Q")

    def __len__(self) -> int:
        return len(self._timestamps)

    def load(self, next_offset: int, *, strict: bool = True) -> None:
        """Read the file and check it: strictly increasing timestamps, non-decreasing
        offsets below ``next_offset``. Non-strict mode drops a bad tail instead."""
        timestamps: list[int] = []
        offsets: array[int] = array("Q")
        for ts, rel in self._read_entries(strict=strict):
            offset = self.base_offset + rel
            bad = (timestamps and (ts <= timestamps[-1] or offset < offsets[-1])) or offset >= next_offset
            if bad:
                if strict:
                    raise CorruptIndexError(
                        f"{self.path.name}: entry ({ts}, {rel}) is out of order or past the log"
                    )
                break
            timestamps.append(ts)
            offsets.append(offset)
        self._timestamps, self._offsets = timestamps, offsets

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """The newest (timestamp, offset), or ``None`` when empty."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        rel = offset - self.base_offset
        if not 0 <= rel <= _U32_MAX:
            raise ValueError(f"offset {offset} does not fit a segment based at {self.base_offset}")
        self._timestamps.append(timestamp)
        self._offsets.append(offset)
        self.write_entry(timestamp, rel)

    def extend_read_only(self, next_offset: int) -> bool:
        """Add the entries the writer wrote after the ones held, as :meth:`load` checks
        them; entries at or past ``next_offset`` (the view's end) wait for a later
        refresh. False when the file was rewritten or an entry is out of order."""
        entries = self.read_tail(len(self._timestamps))
        if entries is None:
            return False
        for ts, rel in entries:
            offset = self.base_offset + rel
            if offset >= next_offset:
                break
            if self._timestamps and (ts <= self._timestamps[-1] or offset < self._offsets[-1]):
                return False
            self._timestamps.append(ts)
            self._offsets.append(offset)
        return True

    def lookup_before(self, timestamp: int) -> int | None:
        """Offset of the newest entry whose timestamp is < ``timestamp``, or ``None``.

        Every batch before the returned offset's batch has only timestamps below the
        target, so a scan for the first record with timestamp ≥ target may start there.
        """
        i = bisect.bisect_left(self._timestamps, timestamp)
        if i == 0:
            return None
        return self._offsets[i - 1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries at or after ``offset`` (the log was truncated there)."""
        keep = bisect.bisect_left(self._offsets, offset)
        if keep == len(self._offsets):
            return
        del self._timestamps[keep:]
        del self._offsets[keep:]
        self._pending.clear()
        self.rewrite(
            [(t, o - self.base_offset) for t, o in zip(self._timestamps, self._offsets, strict=True)]
        )

    def entries(self, last: int | None = None) -> list[tuple[int, int]]:
        """All entries (or the ``last`` few) as (timestamp, absolute offset)."""
        start = 0 if last is None else max(len(self._timestamps) - last, 0)
        return list(zip(self._timestamps[start:], self._offsets[start:], strict=True))

    @property
    def first_entry(self) -> tuple[int, int] | None:
        """The oldest (timestamp, offset), or ``None`` when empty."""
        return (self._timestamps[0], self._offsets[0]) if self._timestamps else None
