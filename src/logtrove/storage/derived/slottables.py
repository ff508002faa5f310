"""The slot tables of ``.keyidx`` blocks, held in memory so that a probe reads no slot.

A key lookup probes every key block of every segment it reads: through the file, one
``pread`` of the slot's bounds then one of its entries (for a chained block of before
version 4, one per entry of its chain). About half the slots of a block are empty (a table
has the next power of two above its entry count), so with the table in memory half the
probes read nothing and the rest one ``pread`` less.

Why a cached table stays right: a block is written once and never changed
(:mod:`.blockfile`); a file is only appended to, cut after its last valid block, or
replaced by a new file (a compaction swap, a truncation: the indexer then writes fresh
files). A table is therefore cached under its file's path and inode, its payload's place
and its header's CRC (:data:`SLOT_TABLES`), and it is cached only after the block header
found in the file at that place was checked to be the view's block (same offsets, log
position, payload length and CRC) and the counts before the table to be the view's. A
replaced file has another inode (or, if the inode number is reused, blocks with other
CRCs); a block rewritten after a cut has another CRC.

Memory: 4 bytes a slot, about 16 bytes per indexed record (a 65,536-record block has
about 197 k entries: 262,144 slots, 1 MiB), within the kind's budget of 256 MiB (about
16 M records). Tables are admitted while they fit (:meth:`.ReaderCache.put_if_room`):
tables of files that are gone or replaced make room; live ones are never evicted, and a
block whose table did not fit is probed through the file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Hashable
from typing import NamedTuple

from logtrove.storage.derived import keyindex
from logtrove.storage.derived.blockfile import BLOCK_HEADER, MAGIC
from logtrove.storage.derived.cache import READERS, Kind

SLOT_TABLES: Kind[bytes] = Kind("key slot tables", 256 << 20)
"""Slot tables (big-endian u32 each) by :class:`TableKey`, weighed in bytes."""

_COUNTS = struct.Struct(">II")


class TableKey(NamedTuple):
    """What names one block's slot table: its file, by path and inode, and its payload's
    place and CRC."""

    path: str
    inode: int
    payload_position: int
    crc: int


class BlockPlace(NamedTuple):
    """What a view knows of a key block, to check against the file before caching."""

    start_offset: int
    end_offset: int
    end_position: int
    payload_position: int
    payload_length: int
    crc: int
    counts_position: int
    slots: int
    entries: int
    grouped: bool  # the entries are grouped by slot (block version ≥ 4), not chained


def slot_table(fd: int, path: str, inode: int, place: BlockPlace) -> bytes | None:
    """The slot table of the block at ``place`` in the ``.keyidx`` open as ``fd`` (``path``,
    ``inode``): cached, or read, checked and cached when it fits; ``None`` when it does
    not fit or the file does not hold that block (the caller probes through the file)."""
    key = TableKey(path, inode, place.payload_position, place.crc)
    table = READERS.get(SLOT_TABLES, key)
    if table is not None:
        return table
    table = _read_checked(fd, place)
    if table is None or not READERS.put_if_room(SLOT_TABLES, key, table, len(table), stale=is_stale):
        return None
    return table


def _read_checked(fd: int, place: BlockPlace) -> bytes | None:
    """The slot table, if the file's block header at ``place`` and the counts before the
    table are the ones the view holds."""
    header_position = place.payload_position - BLOCK_HEADER.size
    raw = os.pread(fd, BLOCK_HEADER.size, header_position)
    if len(raw) != BLOCK_HEADER.size:
        return None
    magic, kind, _, _, start, end, end_pos, length, crc = BLOCK_HEADER.unpack(raw)
    if (magic, kind, start, end, end_pos, length, crc) != (
        MAGIC,
        keyindex.KIND,
        place.start_offset,
        place.end_offset,
        place.end_position,
        place.payload_length,
        place.crc,
    ):
        return None
    size = _COUNTS.size + 4 * place.slots
    data = os.pread(fd, size, place.counts_position)
    if len(data) != size or _COUNTS.unpack_from(data) != (place.slots, place.entries):
        return None
    return data[_COUNTS.size :]


def is_stale(key: Hashable) -> bool:
    """Whether a cached table's file is gone or replaced (another inode at its path): its
    table will never be asked for again."""
    if not isinstance(key, TableKey):
        return True
    try:
        return os.stat(key.path).st_ino != key.inode  # noqa: PTH116 (a str path)
    except FileNotFoundError:
        return True


def as_probe(table: bytes, place: BlockPlace) -> keyindex.Probe:
    """The block at ``place`` as :func:`.keyindex.probe_tables` probes it, with its slot
    ``table`` held in memory."""
    return (table, place.counts_position + _COUNTS.size + 4 * place.slots, place.entries, place.grouped)
