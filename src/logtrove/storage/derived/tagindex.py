"""``.tagidx``: one fixed-width entry per tagged record, for tag-filtered reads and lag.

A record's tag is the value of its topic's ``message.tag.header`` (default ``tag``; the
record's last such header). One file per segment, made of blocks (:mod:`.blockfile`,
kind ``T``) whose payload is::

    ┌──────────────────────────┬──────────────────────────────────────────┐
    │ tag header name len  u16 │ tag header name (UTF-8) at indexing      │
    ├──────────────────────────┼──────────────────────────────────────────┤  block version ≥ 2:
    │ tag count           u16  │ (tag len u16, tag bytes, records u32)    │  the block's distinct
    │ (0xFFFF = not listed)    │   × count, sorted by tag                 │  tags (records: ≥ 3)
    ├──────────────────────────┼──────────────────────┬───────────────────┘
    │ relative offset     u32  │ tag hash        u32  │  × one per tagged record, offset order
    └──────────────────────────┴──────────────────────┘

``tag hash`` is the low 32 bits of xxh3-64 of ``t:`` + tag value (:func:`tag_hash`).
How many records of ``TagA || TagB`` a block holds is read from its tag list, exactly
(it counts tag values, not hashes). A range that cuts a block is counted from its 8-byte
entries: two tags may share a hash, and the block's tag list says whether any of its
tags collides with a wanted one, so a reader is exact without reading records unless
such a collision is present or the tags are not listed (version-1 blocks, or more than
:data:`MAX_LISTED_TAGS` distinct tags), in which case it re-checks the records. Records
without the header have no entry. The blocks say how far the file covers (``end
offset``): records after it are not indexed yet and must be read from the log.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import xxhash

from logtrove.storage.derived.blockfile import Block, read_blocks

KIND = ord("T")
SUFFIX = ".tagidx"
MAX_LISTED_TAGS = 4096  # more distinct tags than this in a block: the list is left out
MAX_LISTED_BYTES = 256 * 1024
NOT_LISTED = 0xFFFF
_U32 = 0xFFFFFFFF
_U16 = struct.Struct(">H")
_U32S = struct.Struct(">I")
_LITTLE_ENDIAN = array("I", [1]).tobytes()[0] == 1


def tag_hash(tag: bytes) -> int:
    """The 32-bit hash stored for a tag value."""
    return xxhash.xxh3_64_intdigest(b"t:" + tag) & _U32


def _tag_list(tags: Mapping[bytes, int] | None) -> bytes:
    if (
        tags is None
        or len(tags) > MAX_LISTED_TAGS
        or sum(len(t) + 6 for t in tags) > MAX_LISTED_BYTES
        or any(len(t) > 0xFFFF for t in tags)
    ):
        return _U16.pack(NOT_LISTED)
    return _U16.pack(len(tags)) + b"".join(_U16.pack(len(t)) + t + _U32S.pack(tags[t]) for t in sorted(tags))


def encode_entries(rel_offsets: array[int], hashes: array[int]) -> bytes:
    """Interleaved big-endian (relative offset, tag hash) pairs, as blocks store them."""
    out = array("I", bytes(8 * len(rel_offsets)))
    out[0::2] = rel_offsets
    out[1::2] = hashes
    if _LITTLE_ENDIAN:
        out.byteswap()
    return out.tobytes()


def encode_payload(tag_header: str, entries: bytes, tags: Mapping[bytes, int] | None = None) -> bytes:
    """The tag header name, the block's distinct tags with their record counts
    (``None``: not listed), then the entries (:func:`encode_entries`). For blocks of the
    current version."""
    name = tag_header.encode("utf-8")
    return _U16.pack(len(name)) + name + _tag_list(tags) + entries


class TagEntries:
    """The decoded payload of one block: for which header, its tags with their record
    counts (``None`` when not listed; counts ``None`` before version 3), and — decoded
    on first use — the entries as two parallel arrays of relative offsets and hashes."""

    __slots__ = ("_entries", "_length", "_raw", "counts", "tag_header", "tags")

    def __init__(
        self,
        tag_header: str,
        tags: frozenset[bytes] | None,
        counts: dict[bytes, int] | None,
        payload: bytes,
        start: int,
    ) -> None:
        self.tag_header = tag_header
        self.tags = tags
        self.counts = counts
        self._raw: tuple[bytes, int] | None = (payload, start)  # one attribute: read atomically
        self._entries: tuple[array[int], array[int]] | None = None
        self._length = (len(payload) - start) // 8

    def __len__(self) -> int:
        return self._length

    def _decode(self) -> tuple[array[int], array[int]]:
        """Decode the entries once (threads may race here: each result is the same, and
        the payload is dropped only after the entries are set)."""
        entries = self._entries
        if entries is None:
            raw = self._raw
            if raw is None:  # another thread finished in between
                entries = self._entries
                assert entries is not None
                return entries
            payload, start = raw
            pairs = array("I", payload[start : start + self._length * 8])
            if _LITTLE_ENDIAN:
                pairs.byteswap()
            entries = (pairs[0::2], pairs[1::2])
            self._entries = entries
            self._raw = None
        return entries

    @property
    def rel_offsets(self) -> array[int]:
        return self._decode()[0]

    @property
    def hashes(self) -> array[int]:
        return self._decode()[1]


def decode_payload(payload: bytes, version: int) -> TagEntries:
    """Decode a block payload written by :func:`encode_payload` (or an older version)."""
    (length,) = _U16.unpack_from(payload)
    pos = 2 + length
    name = payload[2:pos].decode("utf-8")
    tags: frozenset[bytes] | None = None
    counts: dict[bytes, int] | None = None
    if version >= 2:
        (count,) = _U16.unpack_from(payload, pos)
        pos += 2
        if count != NOT_LISTED:
            listed: dict[bytes, int] = {}
            for _ in range(count):
                (size,) = _U16.unpack_from(payload, pos)
                tag = payload[pos + 2 : pos + 2 + size]
                pos += 2 + size
                if version >= 3:
                    (listed[tag],) = _U32S.unpack_from(payload, pos)
                    pos += 4
                else:
                    listed[tag] = -1
            tags = frozenset(listed)
            counts = listed if version >= 3 else None
    return TagEntries(name, tags, counts, payload, pos)


def read_block(fd: int, block: Block) -> TagEntries:
    """The decoded payload of one block of an open ``.tagidx`` file."""
    return decode_payload(os.pread(fd, block.payload_length, block.payload_position), block.version)


def read_entries(fd: int, block: Block, base_offset: int) -> tuple[str, list[tuple[int, int]]]:
    """The tag header name and the (absolute offset, tag hash) entries of one block."""
    entries = read_block(fd, block)
    pairs = zip(entries.rel_offsets, entries.hashes, strict=True)
    return entries.tag_header, [(base_offset + rel, h) for rel, h in pairs]


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
