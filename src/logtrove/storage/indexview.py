"""A reader's view of one segment's derived files, for queries (and anyone else).

:func:`index_view` loads the blocks the three files agree on (CRC-checked) and caches the
result per file version, so repeated queries pay the check once. The view states how far
the segment is indexed (``end_offset`` / ``end_position``); the log after that must be
scanned. It never raises for missing or damaged files: the indexed prefix is then shorter.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from logtrove.storage import keyindex, skipindex, tagindex
from logtrove.storage.blockfile import Block
from logtrove.storage.indexer import common_blocks, derived_path
from logtrove.storage.segment import Segment, segment_file_name

_CACHE_SIZE = 4096
_SUFFIXES = (keyindex.SUFFIX, skipindex.SUFFIX, tagindex.SUFFIX)


@dataclass(frozen=True, slots=True)
class KeyBlock:
    """One ``.keyidx`` block: its log range and the header names it indexed."""

    start_offset: int
    end_offset: int
    start_position: int
    end_position: int
    names: tuple[str, ...]
    counts_position: int
    counts: tuple[int, int] | None = None  # (slots, entries), read when the view loads

    def indexes_id(self, id_header: str) -> bool:
        return bool(self.names) and self.names[0] == id_header

    def indexes_header(self, name: str) -> bool:
        return name in self.names[1:]


@dataclass(frozen=True, slots=True)
class SkipBlock:
    """One ``.skip`` block: its log range and summary."""

    start_offset: int
    end_offset: int
    start_position: int
    end_position: int
    summary: skipindex.SkipSummary


@dataclass(frozen=True, slots=True)
class IndexView:
    """The indexed prefix of one segment."""

    segment: Segment
    end_offset: int
    end_position: int
    key_blocks: tuple[KeyBlock, ...]
    skip_blocks: tuple[SkipBlock, ...]

    def candidates(self, block: KeyBlock, digest: int) -> Iterator[int]:
        """Offsets of entries whose hash matches ``digest`` in ``block``, newest first."""
        with self.key_reader() as reader:
            yield from reader.candidates(block, digest)

    def key_reader(self) -> KeyReader:
        """A reader of this segment's ``.keyidx`` that opens the file once, at its first
        lookup, for every block a search walks (close it, or use it in a ``with``)."""
        return KeyReader(_paths(self.segment)[0], self.segment.base_offset)


class KeyReader:
    """Hash-chain lookups in one ``.keyidx`` through one descriptor, opened lazily (a
    search that skips every block opens nothing) and held until :meth:`close`."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd: int | None = None

    def candidates(self, block: KeyBlock, digest: int) -> Iterator[int]:
        """Offsets of entries whose hash matches ``digest`` in ``block``, newest first."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        return keyindex.candidates(self._fd, block.counts_position, self.base_offset, digest, block.counts)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __enter__(self) -> KeyReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_cache: OrderedDict[tuple[object, ...], IndexView] = OrderedDict()
_cache_lock = threading.Lock()


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _derived_paths(directory: Path, base_offset: int, file_suffix: str) -> tuple[str, str, str]:
    """The ``.keyidx``, ``.skip`` and ``.tagidx`` paths of a segment, as strings: every
    lookup stats them, and building them with pathlib cost more than the stats."""
    key, skip, tag = (
        str(directory / (segment_file_name(base_offset, suffix) + file_suffix)) for suffix in _SUFFIXES
    )
    return key, skip, tag


def _paths(segment: Segment) -> tuple[str, str, str]:
    return _derived_paths(segment.directory, segment.base_offset, segment.file_suffix)


def _version(segment: Segment) -> tuple[object, ...]:
    sizes: list[object] = [segment.log_path, segment.inode, segment.size]
    for path in _paths(segment):
        try:
            st = os.stat(path)  # noqa: PTH116 (a str path, made once: see _derived_paths)
            sizes += [st.st_ino, st.st_size]
        except FileNotFoundError:
            sizes += [None, None]
    return tuple(sizes)


def index_view(segment: Segment) -> IndexView:
    """The current view of ``segment``'s derived files (cached per file version)."""
    key = _version(segment)
    with _cache_lock:
        view = _cache.get(key)
        if view is not None:
            _cache.move_to_end(key)
            # the same files, maybe through another Segment object (a read-only refresh)
            return view if view.segment is segment else dataclasses.replace(view, segment=segment)
    view = _load(segment)
    with _cache_lock:
        _cache[key] = view
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return view


def _load(segment: Segment) -> IndexView:
    blocks = common_blocks(segment)
    key_list = blocks[keyindex.KIND]
    if not key_list:
        return IndexView(segment, segment.base_offset, 0, (), ())
    key_blocks = []
    fd = os.open(derived_path(segment, keyindex.SUFFIX), os.O_RDONLY)
    try:
        start_pos = 0
        for block in key_list:
            names, counts_position = keyindex.read_names(fd, block)
            key_blocks.append(
                KeyBlock(
                    block.start_offset,
                    block.end_offset,
                    start_pos,
                    block.end_position,
                    names,
                    counts_position,
                    keyindex.read_counts(fd, counts_position),
                )
            )
            start_pos = block.end_position
    finally:
        os.close(fd)
    skip_blocks = _skip_blocks(segment, blocks[skipindex.KIND])
    last = key_list[-1]
    return IndexView(segment, last.end_offset, last.end_position, tuple(key_blocks), skip_blocks)


def _skip_blocks(segment: Segment, blocks: list[Block]) -> tuple[SkipBlock, ...]:
    out = []
    fd = os.open(derived_path(segment, skipindex.SUFFIX), os.O_RDONLY)
    try:
        start_pos = 0
        for block in blocks:
            summary = skipindex.decode_payload(os.pread(fd, block.payload_length, block.payload_position))
            out.append(
                SkipBlock(block.start_offset, block.end_offset, start_pos, block.end_position, summary)
            )
            start_pos = block.end_position
    finally:
        os.close(fd)
    return tuple(out)
