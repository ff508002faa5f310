"""Key → latest-offset maps for the cleaner.

Two implementations of one small protocol, :class:`OffsetLookup`:

:class:`OffsetMap` — built by the cleaner over the dirty section, in a fixed memory
budget (Kafka's SkimpyOffsetMap idea). Open addressing over one ``bytearray``::

    slot i:  ┌──────────────────────────────┬──────────────────┐
             │ digest  16 B (xxh3-128 of key)│ offset+1   u64   │   24 bytes
             └──────────────────────────────┴──────────────────┘
    slots = budget // 24; a slot with offset+1 == 0 is empty; linear probing;
    the map reports full at 90 % load so probes stay short.

Keys are compared by digest only (two keys with the same 128-bit digest would be
merged; the probability is ~2**-128 per pair, far below disk corruption).

:class:`OffsetMapFile` — a precomputed map for partitions whose key count is far beyond
one machine's budget (the Spark job ``logtrove.spark`` writes it). Read by binary search
over a memory-mapped file, so it costs no heap::

    ┌──────────────────────────────────────────────────────────────┐
    │ magic "LTOMAP01" 8 B │ end_offset i64 │ count u64 │           │ header, 24 B
    ├──────────────────────────────────────────────────────────────┤
    │ digest 16 B │ offset i64 │  × count, sorted by digest bytes   │ entries, 24 B
    └──────────────────────────────────────────────────────────────┘

``end_offset`` is the offset after the last record the map covers: the cleaner only
removes records below it. Write one with :func:`write_offset_map_file` (from keys),
:func:`write_offset_map_digests` (from digests) or :func:`join_offset_map_parts` (from
part files of entries sorted by digest over disjoint digest ranges, which is how the
Spark job writes maps too large for one process's memory).

Two helpers serve that job on Arrow buffers, with no Python object per key:
:func:`digest_keys` (the digests of a binary key column) and :func:`map_entries` (the
24-byte entries from digests and offsets). Both are compiled in
``logtrove.storage.cleaner._passes`` when built, with pure-Python twins
(:func:`py_digest_keys`, :func:`py_map_entries`) that define them, chosen with the rest
of ``_passes`` as :mod:`logtrove.native` says (``LOGTROVE_PURE_PYTHON=1`` forces the
twins); :data:`IMPLEMENTATION` says which run.
"""

from __future__ import annotations

import itertools
import mmap
import os
import shutil
import struct
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import xxhash

from logtrove.native import compiled, implementation
from logtrove.records.batch import Buffer
from logtrove.storage.cleaner import passes

DIGEST_SIZE = 16
_SLOT = struct.Struct(">16sQ")
_ENTRY = struct.Struct(">16sq")
_FILE_HEADER = struct.Struct(">8sqQ")
FILE_MAGIC = b"LTOMAP01"
MAX_LOAD = 0.9


def key_digest(key: bytes) -> bytes:
    """The 16-byte digest under which a key is stored in every offset map."""
    return xxhash.xxh3_128_digest(key)


class OffsetLookup(Protocol):
    """What the cleaner needs from a map: the latest offset of a key, how far it covers,
    and its table for the copy pass (:mod:`.passes` reads both layouts)."""

    @property
    def end_offset(self) -> int: ...

    @property
    def table(self) -> passes.Table: ...

    @property
    def layout(self) -> int: ...

    def latest(self, key: bytes) -> int | None: ...


class OffsetMapFullError(Exception):
    """The map reached its load limit; the caller stops the round here."""


class OffsetMap:
    """Digest → latest offset in a fixed budget of bytes."""

    layout = passes.HASHED

    def __init__(self, budget_bytes: int) -> None:
        slots = budget_bytes // _SLOT.size
        if slots < 4:
            raise ValueError(
                f"offset map budget {budget_bytes} B is too small: need at least {4 * _SLOT.size} B"
            )
        self.slots = slots
        self.capacity = int(slots * MAX_LOAD)
        self._table = bytearray(slots * _SLOT.size)
        self.size = 0
        self.end_offset = 0
        self.lookups = 0
        self.probes = 0

    @property
    def budget_bytes(self) -> int:
        return len(self._table)

    @property
    def table(self) -> bytearray:
        """The slots (layout in the module doc), for :mod:`.passes`."""
        return self._table

    def _find(self, digest: bytes) -> tuple[int, int]:
        """(slot, stored offset+1) where ``digest`` is or would be inserted."""
        table = self._table
        slot = int.from_bytes(digest[:8], "big") % self.slots
        self.lookups += 1
        while True:
            pos = slot * 24
            stored = int.from_bytes(table[pos + 16 : pos + 24], "big")
            if stored == 0 or table[pos : pos + 16] == digest:
                return slot, stored
            self.probes += 1
            slot = slot + 1 if slot + 1 < self.slots else 0

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as the latest for ``key``.

        Raises :class:`OffsetMapFullError` if ``key`` is new and the map is at its load
        limit; the map is unchanged then.
        """
        digest = key_digest(key)
        slot, stored = self._find(digest)
        if stored == 0:
            if self.size >= self.capacity:
                raise OffsetMapFullError(f"offset map full at {self.size} keys")
            self.size += 1
        _SLOT.pack_into(self._table, slot * 24, digest, offset + 1)

    def put_records(
        self, payload: Buffer, base_offset: int, record_count: int, first_dirty: int, limit: int
    ) -> int | None:
        """:meth:`put` every keyed record of a batch's records section with an offset in
        ``[first_dirty, limit)``, in compiled code when built (:func:`.passes.map_records`).

        Returns ``None``, or the offset of the first record whose key did not fit: the map
        then holds every record before it. Raises :class:`ValueError` for a malformed
        payload.
        """
        self.size, full_at = passes.map_records(
            self._table, self.capacity, self.size, payload, base_offset, record_count, first_dirty, limit
        )
        return full_at

    def latest(self, key: bytes) -> int | None:
        _, stored = self._find(key_digest(key))
        return stored - 1 if stored else None

    def would_fit(self, new_keys: int) -> bool:
        return self.size + new_keys <= self.capacity

    def clear(self) -> None:
        self._table[:] = bytes(len(self._table))
        self.size = 0
        self.end_offset = 0


def write_offset_map_file(path: Path, entries: Iterable[tuple[bytes, int]], end_offset: int) -> int:
    """Write a precomputed map from ``(key, latest offset)`` pairs; returns the count.

    Keys may repeat: the largest offset wins. Written to a temporary file and renamed.
    """
    latest: dict[bytes, int] = {}
    for key, offset in entries:
        digest = key_digest(key)
        if offset > latest.get(digest, -1):
            latest[digest] = offset
    return write_offset_map_digests(path, latest.items(), end_offset)


def write_offset_map_digests(path: Path, digests: Iterable[tuple[bytes, int]], end_offset: int) -> int:
    """Write a map from ``(digest, offset)`` pairs with unique digests (see :func:`key_digest`)."""
    ordered = sorted(digests)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(_FILE_HEADER.pack(FILE_MAGIC, end_offset, len(ordered)))
        for digest, offset in ordered:
            if len(digest) != DIGEST_SIZE:
                raise ValueError("digests must be 16 bytes (logtrove.storage.cleaner.key_digest)")
            f.write(_ENTRY.pack(digest, offset))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return len(ordered)


class OffsetMapFile:
    """A precomputed, sorted map file, searched in place through ``mmap``."""

    layout = passes.SORTED

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _FILE_HEADER.size:
                raise ValueError(f"{path} is not an offset map file (too short)")
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        magic, self._end_offset, self.count = _FILE_HEADER.unpack_from(self._mm, 0)
        if magic != FILE_MAGIC:
            raise ValueError(f"{path} is not an offset map file (magic {magic!r})")
        if _FILE_HEADER.size + self.count * _ENTRY.size != size:
            raise ValueError(f"{path} is truncated: header says {self.count} entries")

    @property
    def end_offset(self) -> int:
        return int(self._end_offset)

    @property
    def table(self) -> mmap.mmap:
        """The whole file (header included), for :mod:`.passes`."""
        return self._mm

    def latest(self, key: bytes) -> int | None:
        digest = key_digest(key)
        lo, hi = 0, self.count
        mm = self._mm
        base = _FILE_HEADER.size
        while lo < hi:
            mid = (lo + hi) // 2
            pos = base + mid * 24
            probe = mm[pos : pos + 16]
            if probe < digest:
                lo = mid + 1
            elif probe > digest:
                hi = mid
            else:
                return int(_ENTRY.unpack_from(mm, pos)[1])
        return None

    def close(self) -> None:
        self._mm.close()


def join_offset_map_parts(path: Path, parts: Iterable[Path], end_offset: int) -> int:
    """Join part files into one map file at ``path``; returns the entry count.

    Each part holds 24-byte entries (layout in the module doc, no header) sorted by
    digest, and the parts cover disjoint digest ranges, in any order: they are joined in
    the order of their first digests, and a part that does not start above the previous
    part's last digest raises :class:`ValueError` (the map would not be sorted). Empty
    parts are skipped. Written to a temporary file, synced and renamed; the parts are
    left for the caller to remove.
    """
    spans: list[tuple[bytes, bytes, Path, int]] = []
    for part in parts:
        size = part.stat().st_size
        if size % _ENTRY.size:
            raise ValueError(f"{part} is not a whole number of {_ENTRY.size}-byte entries ({size} bytes)")
        if size == 0:
            continue
        with part.open("rb") as f:
            first = f.read(DIGEST_SIZE)
            f.seek(size - _ENTRY.size)
            last = f.read(DIGEST_SIZE)
        spans.append((first, last, part, size // _ENTRY.size))
    spans.sort()
    for (_, last, before, _), (first, _, after, _) in itertools.pairwise(spans):
        if first <= last:
            raise ValueError(f"{after} overlaps {before}: the parts do not cover disjoint digest ranges")
    count = sum(n for *_, n in spans)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as out:
        out.write(_FILE_HEADER.pack(FILE_MAGIC, end_offset, count))
        for _, _, part, _ in spans:
            with part.open("rb") as f:
                shutil.copyfileobj(f, out, 8 << 20)
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(path)
    return count


# -- Arrow buffers to digests and entries ------------------------------------------------

DigestKeys = Callable[[Buffer, Buffer, int, bool, int], bytes]
MapEntries = Callable[[Buffer, Buffer, int], bytes]


def py_digest_keys(ends: Buffer, data: Buffer, rows: int, large: bool, offset: int) -> bytes:
    """``16 * rows`` bytes: row ``i``'s digest (:func:`key_digest`) of
    ``data[ends[offset + i]:ends[offset + i + 1]]``, where ``ends`` are Arrow's offsets of
    a binary column (int32, int64 when ``large``, in the host's byte order)."""
    width = 8 if large else 4
    bounds = memoryview(ends).cast("B")
    if rows < 0 or offset < 0 or len(bounds) // width < offset + rows + 1:
        raise ValueError("the offsets buffer is shorter than its rows need")
    starts = bounds[: (len(bounds) // width) * width].cast("q" if large else "i")
    payload = memoryview(data).cast("B")
    out = bytearray()
    for i in range(rows):
        lo, hi = starts[offset + i], starts[offset + i + 1]
        if lo < 0 or hi < lo or hi > len(payload):
            raise ValueError(f"row {i} has offsets outside the data buffer")
        out += xxhash.xxh3_128_digest(payload[lo:hi])
    return bytes(out)


def py_map_entries(digests: Buffer, offsets: Buffer, rows: int) -> bytes:
    """The 24-byte entries of a map file from ``rows`` 16-byte digests and ``rows``
    int64 offsets in the host's byte order (an Arrow int64 buffer)."""
    digest_bytes = memoryview(digests).cast("B")
    offset_bytes = memoryview(offsets).cast("B")
    if rows < 0 or len(digest_bytes) // DIGEST_SIZE < rows or len(offset_bytes) // 8 < rows:
        raise ValueError("the digest or offset buffer is shorter than its rows need")
    values = offset_bytes[: rows * 8].cast("q")
    out = bytearray()
    for i in range(rows):
        out += _ENTRY.pack(bytes(digest_bytes[i * DIGEST_SIZE : (i + 1) * DIGEST_SIZE]), values[i])
    return bytes(out)


NATIVE = compiled("logtrove.storage.cleaner._passes")
IMPLEMENTATION = implementation(NATIVE)
digest_keys: DigestKeys = NATIVE.digest_keys if NATIVE is not None else py_digest_keys
map_entries: MapEntries = NATIVE.map_entries if NATIVE is not None else py_map_entries
