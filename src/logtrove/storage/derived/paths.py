"""Where a segment's derived files live, and in which order they are written.

Each file carries its segment's name and file suffix (a ``.cleaned`` segment's files are
``.cleaned`` too, so they are swapped in with it)::

    00000000000000001234.log       the segment
    00000000000000001234.tagidx    tag entries          (:mod:`.tagindex`, kind ``T``)
    00000000000000001234.skip      time bounds, tokens  (:mod:`.skipindex`, kind ``S``)
    00000000000000001234.keyidx    key / ID / header hashes (:mod:`.keyindex`, kind ``K``)

The writer (:mod:`.indexer`) and every reader (:mod:`.views`, :mod:`.tagblocks`) name
them through this module.
"""

from __future__ import annotations

import functools
from pathlib import Path

from logtrove.storage import Segment, segment_file_name
from logtrove.storage.derived import keyindex, skipindex, tagindex

FILES = (
    (tagindex.KIND, tagindex.SUFFIX),
    (skipindex.KIND, skipindex.SUFFIX),
    (keyindex.KIND, keyindex.SUFFIX),
)
"""(block kind, file suffix) of the three files, in the order a block is written to them:
the key index last, because its block completes the set."""

_SUFFIXES = (keyindex.SUFFIX, skipindex.SUFFIX, tagindex.SUFFIX)


def derived_path(segment: Segment, suffix: str) -> Path:
    """Where a segment's derived file lives (it carries the segment's file suffix)."""
    return segment.directory / (segment_file_name(segment.base_offset, suffix) + segment.file_suffix)


@functools.lru_cache(maxsize=4096)
def _derived_paths(directory: Path, base_offset: int, file_suffix: str) -> tuple[str, str, str]:
    key, skip, tag = (
        str(directory / (segment_file_name(base_offset, suffix) + file_suffix)) for suffix in _SUFFIXES
    )
    return key, skip, tag


def derived_paths(segment: Segment) -> tuple[str, str, str]:
    """The ``.keyidx``, ``.skip`` and ``.tagidx`` paths of a segment, as strings: every
    lookup stats them, and building them with pathlib cost more than the stats."""
    return _derived_paths(segment.directory, segment.base_offset, segment.file_suffix)
