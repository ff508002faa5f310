"""The tag reader: a segment's ``.tagidx`` blocks, decoded once and kept in the readers'
cache, for exact tag-aware counting and reading (``logtrove.groups.tags``).

The blocks are the valid blocks of the ``.tagidx`` file (CRC-checked, ending inside the
log), from the segment's base offset up to the first block written for another tag
header name. Their list is cached per file version, as :func:`.views.index_view` caches
a view: it stays right while the log only grows and the file does not change. A block's
entries are decoded on first use (:class:`.tagindex.TagEntries`) and cached per file,
inode and block place; blocks are written once and never changed, so a cached block
stays true.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from pathlib import Path

from logtrove.storage import Segment
from logtrove.storage.derived import tagindex
from logtrove.storage.derived.blockfile import Block, read_blocks, valid_length
from logtrove.storage.derived.cache import READERS, Kind
from logtrove.storage.derived.paths import derived_paths


@dataclass(frozen=True, slots=True)
class _Listed:
    blocks: tuple[Block, ...]
    log_size: int  # the segment's size when the file was read
    whole: bool  # every block of the file is listed


TAG_FILES: Kind[_Listed] = Kind("tag file", 4096)
"""The valid blocks of ``.tagidx`` files in the readers' cache, per file version."""

TAG_BLOCKS: Kind[tagindex.TagEntries] = Kind("tag block", 16_000_000)
"""Decoded ``.tagidx`` blocks in the readers' cache, weighed by their entries (8 B each)."""


@dataclass(frozen=True, slots=True)
class TagBlock:
    """One ``.tagidx`` block of a segment: offsets ``[start_offset, end_offset)``."""

    base_offset: int
    start_offset: int
    end_offset: int
    entries: tagindex.TagEntries

    def covered_by(self, start: int, end: int) -> bool:
        return start <= self.start_offset and self.end_offset <= end

    def tag_count(self, tags: tuple[bytes, ...]) -> int | None:
        """Records of the whole block tagged with one of ``tags``, from its tag list
        (exact: it counts tag values), or ``None`` when the block does not list counts."""
        counts = self.entries.counts
        if counts is None:
            return None
        return sum(counts.get(t, 0) for t in tags)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Entry indexes ``[i, j)`` of the records with offsets in ``[start, end)``."""
        rel = self.entries.rel_offsets
        i = 0 if start <= self.start_offset else bisect.bisect_left(rel, start - self.base_offset)
        j = len(rel) if end >= self.end_offset else bisect.bisect_left(rel, end - self.base_offset)
        return i, j

    def count(self, wanted: frozenset[int], i: int, j: int) -> int:
        """Entries in ``[i, j)`` whose hash is wanted."""
        hashes = self.entries.hashes
        if i > 0 or j < len(hashes):
            hashes = hashes[i:j]
        return sum(hashes.count(h) for h in wanted)

    def positions(self, wanted: frozenset[int], i: int, j: int) -> list[int]:
        """Entry indexes in ``[i, j)`` whose hash is wanted, in offset order."""
        hashes = self.entries.hashes
        out: list[int] = []
        for h in wanted:
            k = i
            while True:
                try:
                    k = hashes.index(h, k, j)
                except ValueError:
                    break
                out.append(k)
                k += 1
        out.sort()
        return out


def tag_blocks(segment: Segment, tag_header: str) -> list[TagBlock]:
    """The valid ``.tagidx`` blocks of ``segment`` written for ``tag_header``, from its
    base offset on (coverage stops at a block for another header name)."""
    path = derived_paths(segment)[2]
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    try:
        st = os.fstat(fd)
        blocks = _listed(segment, path, st.st_ino, st.st_size)
        out: list[TagBlock] = []
        for b in blocks:
            key = (path, st.st_ino, b.payload_position, b.payload_length, b.start_offset, b.end_offset)
            entries = READERS.get(TAG_BLOCKS, key)
            if entries is None:
                entries = tagindex.read_block(fd, b)
                READERS.put(TAG_BLOCKS, key, entries, len(entries))
            if entries.tag_header != tag_header:
                break
            out.append(TagBlock(segment.base_offset, b.start_offset, b.end_offset, entries))
        return out
    finally:
        os.close(fd)


def _listed(segment: Segment, path: str, inode: int, file_size: int) -> tuple[Block, ...]:
    """The file's valid blocks, from the cache while the file is the same and the log has
    only grown since a read that took every block (see :func:`.views.index_view`)."""
    version = (path, inode, file_size, segment.log_path, segment.inode)
    size = segment.size
    cached = READERS.get(TAG_FILES, version)
    if cached is not None and (cached.log_size == size or (cached.whole and size > cached.log_size)):
        return cached.blocks
    blocks = tuple(read_blocks(Path(path), tagindex.KIND, segment.base_offset, max_position=size))
    whole = valid_length(list(blocks)) == file_size
    READERS.put(TAG_FILES, version, _Listed(blocks, size, whole), replaces=lambda c: c.log_size <= size)
    return blocks
