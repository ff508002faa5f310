"""Block framing shared by the indexer's derived files (``.keyidx``, ``.tagidx``, ``.skip``).

Each derived file of a segment is a sequence of blocks. A block covers a contiguous run
of the segment's log, ``[start offset, end offset)`` ending at log byte ``end position``,
and is written once, in one ``write``, and never changed::

    ┌───────────────────────────── block header (40 bytes) ──────────────────────────────┐
    │ magic "LTB1" 4s │ kind u8 │ version u8 │ reserved u16 │ start offset i64            │
    │ end offset i64  │ end position i64     │ payload length u32 │ payload CRC32C u32    │
    ├────────────────────────────────────────────────────────────────────────────────────┤
    │ payload (format of the file kind: keyindex / tagindex / skipindex)                 │
    └────────────────────────────────────────────────────────────────────────────────────┘
    ┌── block 2 ──┐ ┌── block 3 ──┐ …   block n+1 starts where block n ends (offsets and bytes)

Invariants: the first block starts at the segment's base offset; each block starts at
the previous block's end offset and ends at a larger log position; a file is valid up to
its first block that breaks the chain, is cut short, or fails its CRC. Everything after
that is ignored by readers and cut off by the indexer. A file therefore always describes
exactly the prefix of the log it covers, which is what lets queries scan the rest.

Appending whole blocks (rather than rewriting a slot table in place) is the "chain into
a further file" way of sizing a hash table to its data: each block's table is sized to
its own entries, and none is ever dropped.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

BLOCK_HEADER = struct.Struct(">4sBBHqqqII")
MAGIC = b"LTB1"
VERSION = 4
"""The version blocks are written with: 2, a ``.tagidx`` payload lists the block's tags; 3,
with their record counts; 4, a ``.keyidx`` payload groups its entries by slot."""
MIN_VERSION = 1  # blocks of every version from here on are read; payload readers branch on it


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a derived file, located by its payload's place in the file."""

    kind: int
    start_offset: int
    end_offset: int
    end_position: int
    payload_position: int
    payload_length: int
    version: int = VERSION
    crc: int = 0  # the payload's CRC32C, as its header states it

    @property
    def file_end(self) -> int:
        return self.payload_position + self.payload_length


def encode_block(kind: int, start_offset: int, end_offset: int, end_position: int, payload: bytes) -> bytes:
    """Header and payload of one block, ready to append."""
    header = BLOCK_HEADER.pack(
        MAGIC, kind, VERSION, 0, start_offset, end_offset, end_position, len(payload), crc32c.crc32c(payload)
    )
    return header + payload


def read_blocks(
    path: Path, kind: int, base_offset: int, *, max_position: int | None = None, verify: bool = True
) -> list[Block]:
    """The valid blocks of ``path`` (empty if the file is missing).

    Stops at the first block that is incomplete, of another kind, does not continue the
    chain from ``base_offset``, ends past ``max_position`` of the log (a stale index of a
    longer, replaced log), or (with ``verify``) fails its CRC.
    """
    return list(read_blocks_after(path, kind, base_offset, max_position=max_position, verify=verify).blocks)


@dataclass(frozen=True, slots=True)
class CheckedBlocks:
    """What :func:`read_blocks_after` returned: the valid blocks of the file with inode
    ``inode`` (0: no file)."""

    inode: int
    blocks: tuple[Block, ...]


def read_blocks_after(
    path: Path,
    kind: int,
    base_offset: int,
    *,
    max_position: int | None = None,
    verify: bool = True,
    checked: CheckedBlocks | None = None,
) -> CheckedBlocks:
    """:func:`read_blocks`, resuming after the blocks an earlier call ``checked`` when
    the file is the same one (inode), still holds them, and the last of them ends within
    ``max_position``: blocks are never changed once written and a file is only ever cut
    after its valid blocks, so blocks once checked stay valid while the file is the same.
    A reader of a growing segment then checks each block's CRC once, not at every new
    block."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return CheckedBlocks(0, ())
    try:
        st = os.fstat(fd)
        size = st.st_size
        blocks: list[Block] = []
        pos = 0
        expect_offset, last_position = base_offset, 0
        if (
            checked is not None
            and checked.inode == st.st_ino
            and checked.blocks
            and checked.blocks[-1].file_end <= size
            and (max_position is None or checked.blocks[-1].end_position <= max_position)
        ):
            blocks = list(checked.blocks)
            last = blocks[-1]
            pos, expect_offset, last_position = last.file_end, last.end_offset, last.end_position
        while pos + BLOCK_HEADER.size <= size:
            raw = os.pread(fd, BLOCK_HEADER.size, pos)
            magic, k, version, _, start, end, end_pos, length, crc = BLOCK_HEADER.unpack(raw)
            payload_pos = pos + BLOCK_HEADER.size
            if (
                magic != MAGIC
                or k != kind
                or not MIN_VERSION <= version <= VERSION
                or payload_pos + length > size
            ):
                break
            if start != expect_offset or end <= start or end_pos <= last_position:
                break
            if max_position is not None and end_pos > max_position:
                break
            if verify and crc32c.crc32c(os.pread(fd, length, payload_pos)) != crc:
                break
            blocks.append(Block(k, start, end, end_pos, payload_pos, length, version, crc))
            expect_offset, last_position = end, end_pos
            pos = payload_pos + length
        return CheckedBlocks(st.st_ino, tuple(blocks))
    finally:
        os.close(fd)


def valid_length(blocks: list[Block]) -> int:
    """Bytes of the file that hold valid blocks."""
    return blocks[-1].file_end if blocks else 0
