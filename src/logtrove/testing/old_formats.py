"""Derived files as earlier logtrove versions wrote them, which this one still reads: the
tests and benchmarks that check it make them here.

* :func:`encode_chained_table`, :func:`rewrite_as_version_3`: ``.keyidx`` blocks of
  versions 1-3, RocketMQ's chained table (see :mod:`logtrove.storage.derived.keyindex`),
  as an older logtrove left them in a data directory.
"""

from __future__ import annotations

import os
import struct
from array import array
from pathlib import Path

import crc32c

from logtrove.storage.derived import keyindex
from logtrove.storage.derived.blockfile import BLOCK_HEADER, MAGIC, read_blocks

_U32 = 0xFFFFFFFF


def encode_chained_table(digests: array[int], rel_offsets: array[int]) -> bytes:
    """A table as versions 1-3 wrote it: slot and entry counts, each slot's newest entry
    number + 1 (0: empty), then ``(hash, relative offset, previous entry + 1)`` per entry,
    in the given (offset) order."""
    n = len(digests)
    slots = 1
    while slots < n:
        slots <<= 1
    table = [0] * slots
    entries = []
    for i, (digest, rel) in enumerate(zip(digests, rel_offsets, strict=True)):
        slot = (digest >> 32) & (slots - 1)
        entries.append(struct.pack(">III", digest & _U32, rel, table[slot]))
        table[slot] = i + 1
    return struct.pack(">II", slots, n) + struct.pack(f">{slots}I", *table) + b"".join(entries)


def grouped_entries(table: bytes) -> tuple[array[int], array[int]]:
    """(stored hashes, relative offsets) of a grouped table (version 4), back in offset order."""
    slots, n = struct.unpack_from(">II", table)
    pairs = sorted(
        struct.iter_unpack(">II", table[8 + 4 * slots : 8 + 4 * slots + 8 * n]), key=lambda p: p[1]
    )
    return array("Q", [h for h, _ in pairs]), array("I", [r for _, r in pairs])


def rewrite_as_version_3(path: Path, base_offset: int) -> int:
    """Rewrite every block of the ``.keyidx`` at ``path`` in the chained layout, as
    version-3 blocks over the same log ranges (an index an older logtrove wrote); how
    many blocks. The slot of an entry is chosen by its full 64-bit digest, which the
    grouped table no longer holds, so each stored hash is written back into the slot
    it came from: the rewritten block answers exactly what the original answered."""
    blocks = read_blocks(path, keyindex.KIND, base_offset)
    data = path.read_bytes()
    fd = os.open(path, os.O_RDONLY)
    try:
        names_lengths = [keyindex.read_names(fd, block)[1] - block.payload_position for block in blocks]
    finally:
        os.close(fd)
    out = []
    for block, names_length in zip(blocks, names_lengths, strict=True):
        payload = data[block.payload_position : block.file_end]
        table = payload[names_length:]
        slots, n = struct.unpack_from(">II", table)
        ends = struct.unpack_from(f">{slots}I", table, 8)
        hashes, rels = [], []
        start = 0
        for slot, end in enumerate(ends):
            for h, r in struct.iter_unpack(">II", table[8 + 4 * slots + 8 * start : 8 + 4 * slots + 8 * end]):
                hashes.append((slot << 32) | h)
                rels.append(r)
            start = end
        order = sorted(range(n), key=lambda i: rels[i])
        chained = encode_chained_table(
            array("Q", [hashes[i] for i in order]), array("I", [rels[i] for i in order])
        )
        new_payload = payload[:names_length] + chained
        out.append(
            BLOCK_HEADER.pack(
                MAGIC,
                keyindex.KIND,
                3,
                0,
                block.start_offset,
                block.end_offset,
                block.end_position,
                len(new_payload),
                crc32c.crc32c(new_payload),
            )
            + new_payload
        )
    path.write_bytes(b"".join(out))
    return len(blocks)
