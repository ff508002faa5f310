"""``.keyidx``: a hash-chain index of record keys, client message IDs and indexed headers.

One file per segment, made of blocks (:mod:`.blockfile`, kind ``K``). The payload of a
block is RocketMQ's IndexFile layout, sized to the block's own entries::

    ┌────────────────────┬──────────────────────────────────────────────┐
    │ name count     u16 │ names: (length u16, UTF-8) × name count      │
    ├────────────────────┼────────────────────┬─────────────────────────┘
    │ slot count     u32 │ entry count    u32 │
    ├────────────────────┴────────────────────┤
    │ slots: newest entry number + 1     u32  │ × slot count (0 = empty), a power of two
    ├──────────────┬──────────────────┬───────┴────────────────┐
    │ hash     u32 │ relative offset u32 │ previous entry + 1 u32 │ × entry count, offset order
    └──────────────┴──────────────────┴────────────────────────┘

What is hashed (xxh3-64 of a namespaced input, so one file serves every attribute):
``k:`` + key, ``i:`` + message ID, ``h:<name>:`` + header value. The low 32 bits are
stored in the entry; the high 32 bits choose the slot.

The names are what the block indexed: the message-ID header first, then the indexed
headers (``index.headers`` at indexing time). A block does not answer for a header it
did not index; its range is scanned instead (the topic config may have changed).

Invariants: entries are in increasing record offset; an entry's ``previous`` link points
to an older entry of the same slot, so walking a chain from its slot yields candidates
newest first. Entries are candidates only: equal hashes happen, and every hit must be
checked against the record (the query layer does). No entry is ever dropped.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Callable

import xxhash

from logtrove.native import native
from logtrove.storage.derived.blockfile import Block

KIND = ord("K")
SUFFIX = ".keyidx"
_COUNTS = struct.Struct(">II")
_ENTRY = struct.Struct(">III")
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
    """The payload after the names: slot and entry counts, the slot table and the
    chained entries, for entries given in offset order."""
    n = len(digests)
    slots = 1
    while slots < n:
        slots <<= 1
    mask = slots - 1
    table = [0] * slots
    prev = [0] * n
    for i, s in enumerate([(d >> 32) & mask for d in digests]):
        prev[i] = table[s]
        table[s] = i + 1
    entries = array("I", bytes(12 * n))
    entries[0::3] = array("I", [d & _U32 for d in digests])
    entries[1::3] = rel_offsets
    entries[2::3] = array("I", prev)
    table_array = array("I", table)
    if _native_little_endian():
        table_array.byteswap()
        entries.byteswap()
    return _COUNTS.pack(slots, n) + table_array.tobytes() + entries.tobytes()


def _native_little_endian() -> bool:
    return array("I", [1]).tobytes()[0] == 1


def candidates(
    fd: int, counts_position: int, base_offset: int, digest: int, counts: tuple[int, int] | None = None
) -> list[int]:
    """Absolute offsets whose entry hash equals ``digest``'s, newest first, in the block
    whose slot counts are at ``counts_position`` (from :func:`read_names`); ``counts``,
    when the caller read them already (:func:`read_counts`), saves reading them again."""
    slots, n = counts if counts is not None else read_counts(fd, counts_position)
    return chain(fd, counts_position + _COUNTS.size, slots, n, digest, base_offset)


def py_chain(fd: int, table_position: int, slots: int, n: int, digest: int, base_offset: int) -> list[int]:
    """The offsets of one hash chain: the slot ``digest``'s high 32 bits choose in the
    table at ``table_position`` (``slots`` of them, a power of two, then ``n`` entries),
    walked newest first, keeping the entries whose stored hash is ``digest``'s low 32
    bits. A link that does not point backwards ends the walk (corruption cannot loop);
    a file that ends inside the chain raises ``ValueError``. Defines the behaviour of
    the compiled ``_indexcore.chain`` (one call per key block a query probes)."""
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


Probe = tuple[bytes, int, int]
"""A key block as :func:`probe_tables` probes it: its slot table held in memory, where its
entries start in the file, and how many there are."""


def py_probe_tables(fd: int, probes: tuple[Probe, ...], digest: int, base_offset: int) -> list[list[int]]:
    """:func:`py_chain_from` for each probe, its slot read from the table it holds: one
    list of offsets per probe, in order, empty for an empty slot. A lookup probes every
    key block of a segment in one call; defines the compiled ``_indexcore.probe_tables``."""
    if fd < 0 or not isinstance(probes, tuple):
        raise ValueError("probe_tables(): a bad descriptor or probes")
    out: list[list[int]] = []
    for probe in probes:
        if not (isinstance(probe, tuple) and len(probe) == 3 and isinstance(probe[0], bytes)):
            raise ValueError("probe_tables(): a probe is not (table, entries_position, entry_count)")
        table, entries_position, n = probe
        slots = len(table) // 4
        if len(table) % 4 or slots == 0 or slots & (slots - 1) or entries_position < 0 or not 0 <= n <= _U32:
            raise ValueError("probe_tables(): a bad slot table, position or entry count")
        (link,) = struct.unpack_from(">I", table, 4 * ((digest >> 32) & (slots - 1)))
        out.append(py_chain_from(fd, entries_position, n, link, digest, base_offset) if link and n else [])
    return out


def _pread_all(fd: int, length: int, position: int) -> bytes:
    data = os.pread(fd, length, position)
    if len(data) != length:
        raise ValueError(f"the key index ends inside a hash chain, at byte {position}")
    return data


chain: Callable[[int, int, int, int, int, int], list[int]] = (
    native("logtrove.storage.derived._indexcore", "chain") or py_chain
)
chain_from: Callable[[int, int, int, int, int, int], list[int]] = (
    native("logtrove.storage.derived._indexcore", "chain_from") or py_chain_from
)
probe_tables: Callable[[int, tuple[Probe, ...], int, int], list[list[int]]] = (
    native("logtrove.storage.derived._indexcore", "probe_tables") or py_probe_tables
)


def read_counts(fd: int, counts_position: int) -> tuple[int, int]:
    """(slot count, entry count) of the block whose counts are at ``counts_position``."""
    slots, n = _COUNTS.unpack(os.pread(fd, _COUNTS.size, counts_position))
    return slots, n


def read_entries(fd: int, block: Block) -> tuple[array[int], array[int]]:
    """(stored 32-bit hashes, relative offsets) of every entry of a block, in order."""
    _, counts_position = read_names(fd, block)
    slots, n = _COUNTS.unpack(os.pread(fd, _COUNTS.size, counts_position))
    raw = array("I", os.pread(fd, 12 * n, counts_position + _COUNTS.size + 4 * slots))
    if _native_little_endian():
        raw.byteswap()
    return raw[0::3], raw[1::3]
