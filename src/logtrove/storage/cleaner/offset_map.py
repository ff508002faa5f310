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
removes records below it. Write one with :func:`write_offset_map_file`.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import xxhash

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
