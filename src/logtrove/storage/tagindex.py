"""``.tagidx``: one fixed-width entry per tagged record, for tag-filtered reads and lag.

A record's tag is the value of its topic's ``message.tag.header`` (default ``tag``). One
file per segment, made of blocks (:mod:`.blockfile`, kind ``T``) whose payload is::

    ┌──────────────────────────┬──────────────────────────────────────┐
    │ tag header name len  u16 │ tag header name (UTF-8) at indexing  │
    ├──────────────────────────┼──────────────────────┬───────────────┘
    │ relative offset     u32  │ tag hash        u32  │  × one per tagged record, offset order
    └──────────────────────────┴──────────────────────┘

``tag hash`` is the low 32 bits of xxh3-64 of ``t:`` + tag value (:func:`tag_hash`).
Counting the records of ``TagA || TagB`` in ``[a, b)`` reads 8-byte entries instead of
the log; as with every hash, a reader that must be exact re-checks the records whose hash
matches (two tags may share a hash). Records without the header have no entry. The
blocks say how far the file covers (``end offset``): records after it are not indexed yet
and must be read from the log.
"""

from __future__ import annotations

import os
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path

import xxhash

from logtrove.storage.blockfile import Block, read_blocks

KIND = ord("T")
SUFFIX = ".tagidx"
_U32 = 0xFFFFFFFF
_U16 = struct.Struct(">H")


def tag_hash(tag: bytes) -> int:
    """The 32-bit hash stored for a tag value."""
    return xxhash.xxh3_64_intdigest(b"t:" + tag) & _U32


def encode_payload(tag_header: str, rel_offsets: array[int], hashes: array[int]) -> bytes:
    """The tag header name, then interleaved (relative offset, tag hash) pairs."""
    out = array("I", bytes(8 * len(rel_offsets)))
    out[0::2] = rel_offsets
    out[1::2] = hashes
    if array("I", [1]).tobytes()[0] == 1:
        out.byteswap()
    name = tag_header.encode("utf-8")
    return _U16.pack(len(name)) + name + out.tobytes()


def read_entries(fd: int, block: Block, base_offset: int) -> tuple[str, list[tuple[int, int]]]:
    """The tag header name and the (absolute offset, tag hash) entries of one block."""
    payload = os.pread(fd, block.payload_length, block.payload_position)
    (length,) = _U16.unpack_from(payload)
    name = payload[2 : 2 + length].decode("utf-8")
    raw = array("I", payload[2 + length :])
    if array("I", [1]).tobytes()[0] == 1:
        raw.byteswap()
    return name, [(base_offset + raw[i], raw[i + 1]) for i in range(0, len(raw) - 1, 2)]


@dataclass(frozen=True, slots=True)
class TagIndex:
    """What a ``.tagidx`` file says: entries below ``end_offset``, and for which header."""

    entries: list[tuple[int, int]]
    end_offset: int
    tag_header: str | None


def read_tag_index(path: Path, base_offset: int, tag_header: str | None = None) -> TagIndex:
    """Every (offset, tag hash) entry of a ``.tagidx`` file and the offset it covers up to
    (``base_offset`` when missing or empty): records ≥ ``end_offset`` must be read from the
    log. With ``tag_header``, coverage stops at the first block written for another tag
    header name (the topic's ``message.tag.header`` changed)."""
    blocks = read_blocks(path, KIND, base_offset)
    entries: list[tuple[int, int]] = []
    end, name = base_offset, None
    if not blocks:
        return TagIndex(entries, end, name)
    fd = os.open(path, os.O_RDONLY)
    try:
        for block in blocks:
            block_name, block_entries = read_entries(fd, block, base_offset)
            if tag_header is not None and block_name != tag_header:
                break
            entries += block_entries
            end, name = block.end_offset, block_name
    finally:
        os.close(fd)
    return TagIndex(entries, end, name)
