"""``.keyidx``: a hash index of record keys, client message IDs and indexed headers.

One file per segment, made of blocks (:mod:`.blockfile`, kind ``K``). The payload of a
block is a hash table sized to the block's own entries, its entries grouped by slot
(block version ≥ 4, :data:`GROUPED_VERSION`)::

    ┌────────────────────┬──────────────────────────────────────────────┐
    │ name count     u16 │ names: (length u16, UTF-8) × name count      │
    ├────────────────────┼────────────────────┬─────────────────────────┘
    │ slot count     u32 │ entry count    u32 │
    ├────────────────────┴────────────────────┤
    │ slots: end of the slot's entries   u32  │ × slot count, a power of two
    ├──────────────┬──────────────────────────┤
    │ hash     u32 │ relative offset      u32 │ × entry count, by slot, newest first in each
    └──────────────┴──────────────────────────┘

Slot ``s`` holds entries ``[slots[s - 1], slots[s])`` (from 0 for the first slot): a probe
reads its slot's entries in one ``pread``, however many keys share the slot. (Blocks
before version 4 chain them, RocketMQ's IndexFile layout: a slot holds its newest entry
number + 1, and each 12-byte entry of ``(hash, relative offset, previous entry + 1)``,
in offset order, links to an older one of its slot; a probe then reads entry by entry.
Those blocks are still read; none is written.)

What is hashed (xxh3-64 of a namespaced input, so one file serves every attribute):
``k:`` + key, ``i:`` + message ID, ``h:<name>:`` + header value. The low 32 bits are
stored in the entry; the high 32 bits choose the slot.

The names are what the block indexed: the message-ID header first, then the indexed
headers (``index.headers`` at indexing time). A block does not answer for a header it
did not index; its range is scanned instead (the topic config may have changed).

Invariants: the slot ends never decrease and the last is the entry count; within a slot,
entries are in decreasing record offset, so a probe yields candidates newest first.
Entries are candidates only: equal hashes happen, and every hit must be checked against
the record (the query layer does). No entry is ever dropped. A damaged table cannot make
a probe read outside its block's entries (its ends are clamped to the entry count).
"""

from __future__ import annotations

import itertools
import os
import struct
from array import array
from collections.abc import Callable

import xxhash

from logtrove.native import compiled, implementation
from logtrove.storage.derived.blockfile import Block

KIND = ord("K")
SUFFIX = ".keyidx"
GROUPED_VERSION = 4
"""The first block version whose entries are grouped by slot (before it: chained)."""
_COUNTS = struct.Struct(">II")
_ENTRY = struct.Struct(">III")  # a chained entry: hash, relative offset, previous entry + 1
_PAIR = struct.Struct(">II")  # a grouped entry: hash, relative offset
_SLOT = struct.Struct(">I")
_U16 = struct.Struct(">H")
_U32 = 0xFFFFFFFF


def key_digest(key: bytes) -> int:
    """The 64-bit hash of a record key."""
    return xxhash.xxh3_64_intdigest(b"k:" + key)


def id_digest(message_id: bytes) -> int:
    """The 64-bit hash of a client message ID (the value of ``message.id.header``)."""
    return xxhash.xxh3_64_intdigest(b"i:" + message_id)


def header_digest(name: str, value: bytes) -> int:
    """The 64-bit hash of one indexed header ``name=value``."""
    return xxhash.xxh3_64_intdigest(b"h:" + name.encode("utf-8") + b":" + value)


def encode_names(names: tuple[str, ...]) -> bytes:
    out = [_U16.pack(len(names))]
    for name in names:
        raw = name.encode("utf-8")
        out += [_U16.pack(len(raw)), raw]
    return b"".join(out)


def read_names(fd: int, block: Block) -> tuple[tuple[str, ...], int]:
    """The names a block indexed and the file position of its slot counts."""
    pos = block.payload_position
    head = os.pread(fd, min(block.payload_length, 4096), pos)
    (count,) = _U16.unpack_from(head)
    p = 2
    names = []
    for _ in range(count):
        if p + 2 > len(head):
            head = os.pread(fd, block.payload_length, pos)
        (length,) = _U16.unpack_from(head, p)
        if p + 2 + length > len(head):
            head = os.pread(fd, block.payload_length, pos)
        names.append(head[p + 2 : p + 2 + length].decode("utf-8"))
        p += 2 + length
    return tuple(names), pos + p


def encode_payload(names: tuple[str, ...], digests: array[int], rel_offsets: array[int]) -> bytes:
    """A whole block payload for entries given in offset order."""
    return encode_names(names) + encode_table(digests, rel_offsets)


def encode_table(digests: array[int], rel_offsets: array[int]) -> bytes:
    """The payload after the names: slot and entry counts, the slot ends and the entries
    grouped by slot, newest first in each, for entries given in offset order. Defines the
    bytes of the compiled ``Pending.key_table``."""
    n = len(digests)
    slots = 1
    while slots < n:
        slots <<= 1
    mask = slots - 1
    slot_of = [(d >> 32) & mask for d in digests]
    sizes = [0] * slots
    for s in slot_of:
        sizes[s] += 1
    order = sorted(range(n), key=lambda i: (slot_of[i], -i))
    entries = array("I", bytes(8 * n))
    entries[0::2] = array("I", [digests[i] & _U32 for i in order])
    entries[1::2] = array("I", [rel_offsets[i] for i in order])
    ends = array("I", itertools.accumulate(sizes))
    if _native_little_endian():
        ends.byteswap()
        entries.byteswap()
    return _COUNTS.pack(slots, n) + ends.tobytes() + entries.tobytes()


def _native_little_endian() -> bool:
    return array("I", [1]).tobytes()[0] == 1


def candidates(
    fd: int,
    counts_position: int,
    base_offset: int,
    digest: int,
    counts: tuple[int, int] | None = None,
    *,
    grouped: bool = True,
) -> list[int]:
    """Absolute offsets whose entry hash equals ``digest``'s, newest first, in the block
    whose slot counts are at ``counts_position`` (from :func:`read_names`), read through
    the file: its entries grouped by slot (``grouped``: block version ≥ 4) or chained.
    ``counts``, when the caller read them already (:func:`read_counts`), saves reading
    them again."""
    slots, n = counts if counts is not None else read_counts(fd, counts_position)
    table_position = counts_position + _COUNTS.size
    if not grouped:
        return chain(fd, table_position, slots, n, digest, base_offset)
    if slots <= 0 or slots & (slots - 1) or n == 0:
        return []
    s = (digest >> 32) & (slots - 1)
    raw = _pread_all(fd, 8 if s else 4, table_position + 4 * (s - 1 if s else 0))
    start, end = _PAIR.unpack(raw) if s else (0, *_SLOT.unpack(raw))
    return py_slot_entries(fd, table_position + 4 * slots, n, start, end, digest, base_offset)


def py_slot_entries(
    fd: int, entries_position: int, n: int, start: int, end: int, digest: int, base_offset: int
) -> list[int]:
    """The offsets of the grouped entries ``[start, end)`` (one slot's, clamped to the
    block's ``n`` entries) at ``entries_position`` whose stored hash is ``digest``'s low 32
    bits, in their order (newest first): one ``pread``. How :func:`py_probe_tables` reads
    a grouped block's slot."""
    end = min(end, n)
    if start >= end:
        return []
    raw = _pread_all(fd, 8 * (end - start), entries_position + 8 * start)
    want = digest & _U32
    return [base_offset + rel for stored, rel in _PAIR.iter_unpack(raw) if stored == want]


def py_chain(fd: int, table_position: int, slots: int, n: int, digest: int, base_offset: int) -> list[int]:
    """The offsets of one hash chain: the slot ``digest``'s high 32 bits choose in the
    table at ``table_position`` (``slots`` of them, a power of two, then ``n`` entries),
    walked newest first, keeping the entries whose stored hash is ``digest``'s low 32
    bits. A link that does not point backwards ends the walk (corruption cannot loop);
    a file that ends inside the chain raises ``ValueError``. Defines the behaviour of
    the compiled ``_indexcore.chain`` (how a chained block, before version 4, is probed
    through the file)."""
    if (
        fd < 0
        or table_position < 0
        or slots <= 0
        or slots & (slots - 1)
        or slots > _U32
        or not 0 <= n <= _U32
    ):
        raise ValueError("chain(): a bad descriptor, position or slot count")
    if n == 0:
        return []
    (link,) = _SLOT.unpack(_pread_all(fd, 4, table_position + 4 * ((digest >> 32) & (slots - 1))))
    return py_chain_from(fd, table_position + 4 * slots, n, link, digest, base_offset)


def py_chain_from(
    fd: int, entries_position: int, n: int, link: int, digest: int, base_offset: int
) -> list[int]:
    """What :func:`py_chain` answers once it has read the slot: the chain from ``link`` (a
    slot's value, the newest entry number + 1, 0 for an empty slot) through the ``n``
    entries at ``entries_position``. For a caller that holds the block's slot table in
    memory (:mod:`.slottables`); defines the compiled ``_indexcore.chain_from``."""
    if fd < 0 or entries_position < 0 or not 0 <= n <= _U32 or not 0 <= link <= _U32:
        raise ValueError("chain_from(): a bad descriptor, position or link")
    out: list[int] = []
    if n == 0:
        return out
    want = digest & _U32
    steps = 0
    while link and steps <= n:
        stored, rel, prev = _ENTRY.unpack(_pread_all(fd, 12, entries_position + 12 * (link - 1)))
        if stored == want:
            out.append(base_offset + rel)
        if prev >= link:  # links only point backwards; anything else is corruption
            break
        link = prev
        steps += 1
    return out


Probe = tuple[bytes, int, int, bool]
"""A key block as :func:`probe_tables` probes it: its slot table held in memory, where its
entries start in the file, how many there are, and whether they are grouped by slot
(block version ≥ 4) or chained."""


def py_probe_tables(fd: int, probes: tuple[Probe, ...], digest: int, base_offset: int) -> list[list[int]]:
    """The candidates of each probed block, its slot read from the table it holds: one
    list of offsets per probe, in order, empty for an empty slot (nothing read). A grouped
    block's slot is read in one ``pread`` (:func:`py_slot_entries`), a chained block's
    chain entry by entry (:func:`py_chain_from`). A lookup probes several key blocks of a
    segment in one call; defines the compiled ``_indexcore.probe_tables``."""
    if fd < 0 or not isinstance(probes, tuple):
        raise ValueError("probe_tables(): a bad descriptor or probes")
    out: list[list[int]] = []
    for probe in probes:
        if not (
            isinstance(probe, tuple)
            and len(probe) == 4
            and isinstance(probe[0], bytes)
            and isinstance(probe[3], bool)
        ):
            raise ValueError("probe_tables(): a probe is not (table, entries_position, entry_count, grouped)")
        table, entries_position, n, grouped = probe
        slots = len(table) // 4
        if len(table) % 4 or slots == 0 or slots & (slots - 1) or entries_position < 0 or not 0 <= n <= _U32:
            raise ValueError("probe_tables(): a bad slot table, position or entry count")
        start, link = _slot_bounds(table, 0, (digest >> 32) & (slots - 1))
        if grouped:
            out.append(py_slot_entries(fd, entries_position, n, start, link, digest, base_offset))
        else:
            out.append(
                py_chain_from(fd, entries_position, n, link, digest, base_offset) if link and n else []
            )
    return out


def py_tables_candidates(tables: tuple[bytes, ...], digest: int, base_offset: int) -> list[int]:
    """The candidates of whole grouped tables held in memory (each a payload after the
    names, as :func:`encode_table` makes it: the query tail's tables), the newest table
    (the last) first, each table's slot entries in their order (newest first). A table
    too short for its counts raises ``ValueError``; slot ends are clamped to its entries.
    Defines the compiled ``_indexcore.tables_candidates``."""
    if not isinstance(tables, tuple):
        raise ValueError("tables_candidates(): tables is not a tuple")
    want = digest & _U32
    out: list[int] = []
    for table in reversed(tables):
        if not isinstance(table, bytes) or len(table) < _COUNTS.size:
            raise ValueError("tables_candidates(): a table is not bytes holding its counts")
        slots, n = _COUNTS.unpack_from(table)
        if slots == 0 or slots & (slots - 1) or len(table) < _COUNTS.size + 4 * slots + 8 * n:
            raise ValueError("tables_candidates(): a table shorter than its counts say")
        start, end = _slot_bounds(table, _COUNTS.size, (digest >> 32) & (slots - 1))
        entries = _COUNTS.size + 4 * slots
        raw = memoryview(table)[entries + 8 * start : entries + 8 * max(start, min(end, n))]
        out += [base_offset + rel for stored, rel in _PAIR.iter_unpack(raw) if stored == want]
    return out


def _slot_bounds(table: bytes, position: int, slot: int) -> tuple[int, int]:
    """``(previous slot's value, the slot's value)`` of a slot table held at ``position`` in
    ``table``: a grouped block's ``[start, end)`` of the slot's entries (0 before the first
    slot); the second is a chained block's link."""
    (value,) = _SLOT.unpack_from(table, position + 4 * slot)
    (before,) = _SLOT.unpack_from(table, position + 4 * (slot - 1)) if slot else (0,)
    return before, value


def _pread_all(fd: int, length: int, position: int) -> bytes:
    data = os.pread(fd, length, position)
    if len(data) != length:
        raise ValueError(f"the key index ends inside a block's entries, at byte {position}")
    return data


# The probes are compiled in ``_indexcore`` beside the indexer's ``Pending``
# (:mod:`.blockentries`): both modules take all of it or none (:mod:`logtrove.native`).
NATIVE = compiled("logtrove.storage.derived._indexcore")
IMPLEMENTATION = implementation(NATIVE)
chain: Callable[[int, int, int, int, int, int], list[int]] = NATIVE.chain if NATIVE is not None else py_chain
chain_from: Callable[[int, int, int, int, int, int], list[int]] = (
    NATIVE.chain_from if NATIVE is not None else py_chain_from
)
probe_tables: Callable[[int, tuple[Probe, ...], int, int], list[list[int]]] = (
    NATIVE.probe_tables if NATIVE is not None else py_probe_tables
)
tables_candidates: Callable[[tuple[bytes, ...], int, int], list[int]] = (
    NATIVE.tables_candidates if NATIVE is not None else py_tables_candidates
)


def read_counts(fd: int, counts_position: int) -> tuple[int, int]:
    """(slot count, entry count) of the block whose counts are at ``counts_position``."""
    slots, n = _COUNTS.unpack(os.pread(fd, _COUNTS.size, counts_position))
    return slots, n
