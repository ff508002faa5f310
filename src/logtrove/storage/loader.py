"""Opening a partition's directory: the segment list it holds, recovered after a crash
(Kafka's ``LogLoader``).

::

    topic-0/
      00000000000000000000.log  .index  .timeindex ...   sealed, below the recovery point
      00000000000000000120.log  ...                      holds the recovery point ─┐ recovered
      00000000000000000377.log  ...                      (active)  ────────────────┘ if unclean
      00000000000000000502.log.deleted                   removed (writer)
      .something.tmp                                     removed (writer)
      swap-00000000000000000120.json, *.cleaned, *.swap  finished or undone first (storage.swap)

A writer first finishes or undoes an interrupted cleaner swap
(:func:`~logtrove.storage.swap.recover_swaps`), then lists the ``<base>.log`` files
(removing ``.deleted`` and ``.tmp`` leftovers) and opens each in base order. After an
unclean shutdown every segment that reaches past the recovery point is re-validated
batch by batch and cut after its last good batch (:meth:`Segment.recover`); the others
are trusted, since a flush fsynced them before the recovery point passed them. The
recovered segments are then fsynced, so that what recovery kept is on disk.

Invariants of the list returned to a writer: it is never empty (an empty directory gets
an empty segment at offset 0), and only its first and last segments may be empty. An
empty segment in the middle is a crash's leftover (between creating a segment and writing
to it) and carries nothing; an empty first segment is the cleaner's, which compacted
every record of it away, and it carries the log's start: its base offset is the floor of
the log start offset, which compaction never moves (Kafka keeps such a segment too). The
active segment's ``created_ms`` is its first batch's timestamp when older than now:
``segment.ms`` counts from the first record, so a restart does not make it young again.

A read-only opening (another process reading the writer's directory) changes nothing on
disk, recovers nothing, and skips a segment the writer deleted between the listing and
the opening; its list may be empty.

Before anything else, the directory must not be a symbolic link nor hold one, at any
depth (:func:`refuse_links`): everything done to a partition's files after this
(recovery's truncation, retention's and deletion's unlinks, the cleaner's renames) goes
through the paths listed here, so this one check keeps all of it inside the data
directory. A partition that fails it raises :class:`UnsafePartitionError` and is not
opened; nothing in it or behind the link is touched.
"""

from __future__ import annotations

import os
from pathlib import Path

from logtrove.clock import Clock, ascii_int
from logtrove.storage.config import TopicConfig
from logtrove.storage.errors import UnsafePartitionError
from logtrove.storage.segment import Segment
from logtrove.storage.segmentnames import LOG_SUFFIX
from logtrove.storage.segments import LogSegments
from logtrove.storage.swap import DELETED_SUFFIX, recover_swaps


def load_segments(
    directory: Path,
    config: TopicConfig,
    clock: Clock,
    *,
    read_only: bool,
    recovery_point: int,
    clean_shutdown: bool,
) -> tuple[LogSegments, int]:
    """The segments of ``directory`` (module doc), and how many bytes recovery cut from
    the ends of their files."""
    refuse_links(directory)
    if not read_only:
        recover_swaps(directory)
    loaded = LogSegments()
    truncated = 0
    bases = sorted(segment_bases(directory, read_only=read_only))
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        unflushed = next_base is None or next_base > recovery_point
        recover = not clean_shutdown and unflushed
        seg = open_listed_segment(directory, config, base, read_only=read_only, recover=recover)
        if seg is not None:
            loaded.add(seg)
            truncated += seg.truncated_bytes
    if read_only:
        return loaded, truncated
    if not loaded.segments:
        loaded.add(Segment.create(directory, 0, index_interval_bytes=config.index_interval_bytes))
    _drop_empty_middle_segments(loaded)
    first = loaded.active.first_batch_timestamp
    now = clock.now_ms()
    loaded.active.created_ms = now if first is None else min(now, first)
    if not clean_shutdown:
        for seg in loaded.segments:
            if seg.base_offset >= loaded.floor(recovery_point).base_offset:
                seg.flush()
    return loaded, truncated


def refuse_links(directory: Path) -> None:
    """Raise :class:`UnsafePartitionError` if the partition directory ``directory`` is a
    symbolic link or holds one (in it or in a directory under it); a missing directory
    passes (a new partition's, or a reader's view of a deleted one)."""
    if directory.is_symlink():
        _refuse(directory, directory)
    if not directory.is_dir():
        return
    for root, dirs, files in os.walk(directory, followlinks=False):
        for name in dirs + files:
            path = Path(root, name)
            if path.is_symlink():
                _refuse(directory, path)


def _refuse(directory: Path, link: Path) -> None:
    try:
        target = str(link.readlink())
    except OSError:
        target = "?"
    where = (
        "is a symbolic link" if link == directory else f"holds a symbolic link, {link.relative_to(directory)}"
    )
    raise UnsafePartitionError(
        f"partition directory {directory} {where} (to {target}); logtrove truncates and "
        "deletes the files of its partitions and does not follow links out of its data "
        "directory, so this partition stays closed. Put the files themselves in its place "
        "(replace the link by a copy) or remove the link, then start again"
    )


def segment_bases(directory: Path, *, read_only: bool) -> list[int]:
    """The base offsets of the ``<base>.log`` files in ``directory`` (unordered; none
    when it is gone). A writer removes ``.deleted`` and ``.tmp`` leftovers on the way."""
    if not directory.is_dir():
        return []
    bases = []
    for entry in os.scandir(directory):
        name = entry.name
        base = ascii_int(name[: -len(LOG_SUFFIX)]) if name.endswith(LOG_SUFFIX) else None
        if base is not None:
            bases.append(base)
        elif not read_only and name.endswith((DELETED_SUFFIX, ".tmp")):
            Path(entry.path).unlink(missing_ok=True)
    return bases


def open_listed_segment(
    directory: Path, config: TopicConfig, base: int, *, read_only: bool, recover: bool
) -> Segment | None:
    """Open a segment found in the directory listing; ``None`` when a read-only
    opening finds it gone (the writer deleted it since the listing)."""
    try:
        return Segment.open(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            read_only=read_only,
            recover=recover,
        )
    except FileNotFoundError:
        if not read_only:
            raise
        return None


def _drop_empty_middle_segments(loaded: LogSegments) -> None:
    """A crash between creating a segment and writing to it leaves an empty file; an
    empty segment between the first and the last carries nothing and is removed. The
    first stays: its base offset bounds the log start offset from below at the next
    opening, and the cleaner may have emptied it."""
    for seg in list(loaded.segments[1:-1]):
        if seg.size == 0:
            loaded.remove(seg)
            seg.delete_files()
