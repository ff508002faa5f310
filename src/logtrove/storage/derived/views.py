"""A reader's view of one segment's derived files, for queries.

:func:`index_view` loads the blocks the three files agree on (:func:`common_blocks`,
CRC-checked) and keeps the result in the readers' cache (:mod:`.cache`) per file version,
so repeated queries pay the check once; a reload after the indexer appended a block
checks and decodes only the blocks the last load of the same files had not
(:data:`CHECKED`). The view states how far the segment is indexed
(``end_offset`` / ``end_position``); the log after that must be scanned. It never raises
for missing or damaged files: the indexed prefix is then shorter.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass

from logtrove.storage import Segment
from logtrove.storage.derived import keyindex, skipindex, tagindex
from logtrove.storage.derived.blockfile import Block, CheckedBlocks, read_blocks_after, valid_length
from logtrove.storage.derived.cache import READERS, Kind
from logtrove.storage.derived.paths import FILES, derived_path, derived_paths
from logtrove.storage.derived.slottables import BlockPlace, as_probe, slot_table


def common_blocks(segment: Segment, *, verify: bool = True) -> dict[int, list[Block]]:
    """The blocks of the three files, cut to the longest prefix they agree on."""
    return _agreed(_read_files(segment, verify=verify))


def _read_files(
    segment: Segment, *, verify: bool = True, checked: dict[int, CheckedBlocks] | None = None
) -> dict[int, CheckedBlocks]:
    """Each file's valid blocks, reading on after those ``checked`` before (see
    :func:`read_blocks_after`)."""
    return {
        kind: read_blocks_after(
            derived_path(segment, suffix),
            kind,
            segment.base_offset,
            max_position=segment.size,
            verify=verify,
            checked=None if checked is None else checked.get(kind),
        )
        for kind, suffix in FILES
    }


def _agreed(files: dict[int, CheckedBlocks]) -> dict[int, list[Block]]:
    lists = {kind: f.blocks for kind, f in files.items()}
    n = 0
    while all(len(blocks) > n for blocks in lists.values()):
        spans = {(b[n].start_offset, b[n].end_offset, b[n].end_position) for b in lists.values()}
        if len(spans) != 1:
            break
        n += 1
    return {kind: list(blocks[:n]) for kind, blocks in lists.items()}


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
    place: BlockPlace | None = None  # where the view found it: lets its slot table be cached
    block: Block | None = None  # the block it was decoded from (a reload reuses it)

    @property
    def grouped(self) -> bool:
        """Whether the block's entries are grouped by slot (see :mod:`.keyindex`)."""
        return self.block is None or self.block.version >= keyindex.GROUPED_VERSION

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
    block: Block | None = None  # the block it was decoded from (a reload reuses it)


@dataclass(frozen=True, slots=True)
class IndexView:
    """The indexed prefix of one segment."""

    segment: Segment
    end_offset: int
    end_position: int
    key_blocks: tuple[KeyBlock, ...]
    skip_blocks: tuple[SkipBlock, ...]
    # the key blocks' slot tables this view fetched (None: probed through the file), by
    # counts position; shared by the copies index_view makes for other Segment objects
    slot_tables: dict[int, bytes | None] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    # the key blocks as one compiled call probes them all (KeyReader.probe_all), made at
    # the first lookup: empty until then, [None] when a block is probed through the file
    probes: list[tuple[keyindex.Probe, ...] | None] = dataclasses.field(
        default_factory=list, compare=False, repr=False
    )

    def candidates(self, block: KeyBlock, digest: int) -> Iterator[int]:
        """Offsets of entries whose hash matches ``digest`` in ``block``, newest first."""
        with self.key_reader() as reader:
            yield from reader.candidates(block, digest)

    def key_reader(self) -> KeyReader:
        """A reader of this segment's ``.keyidx`` that opens the file once, at its first
        lookup, for every block a search walks (close it, or use it in a ``with``)."""
        return KeyReader(
            derived_paths(self.segment)[0], self.segment.base_offset, self.slot_tables, self.probes
        )


class KeyReader:
    """Hash lookups in one ``.keyidx`` through one descriptor, opened lazily (a
    search that skips every block opens nothing) and held until :meth:`close`. A block's
    slot is read from its slot table in memory (:mod:`.slottables`) when the table is
    cached or fits, else from the file. ``tables`` keeps what was fetched for the view's
    blocks, so a later lookup through the same view asks the shared cache nothing."""

    def __init__(
        self,
        path: str,
        base_offset: int,
        tables: dict[int, bytes | None] | None = None,
        probes: list[tuple[keyindex.Probe, ...] | None] | None = None,
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self._tables: dict[int, bytes | None] = {} if tables is None else tables
        self._probes: list[tuple[keyindex.Probe, ...] | None] = [] if probes is None else probes
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        return self._fd

    def _table(self, fd: int, place: BlockPlace) -> bytes | None:
        table = self._tables.get(place.counts_position, b"")
        if table == b"":
            table = self._tables[place.counts_position] = slot_table(
                fd, self.path, os.fstat(fd).st_ino, place
            )
        return table

    def candidates(self, block: KeyBlock, digest: int) -> list[int]:
        """Offsets of entries whose hash matches ``digest`` in ``block``, newest first."""
        fd = self._open()
        place = block.place
        if place is not None:
            table = self._table(fd, place)
            if table is not None:
                return keyindex.probe_tables(fd, (as_probe(table, place),), digest, self.base_offset)[0]
        return keyindex.candidates(
            fd, block.counts_position, self.base_offset, digest, block.counts, grouped=block.grouped
        )

    def probe_all(
        self, blocks: tuple[KeyBlock, ...], digest: int, low: int = 0, high: int | None = None
    ) -> list[list[int]] | None:
        """:meth:`candidates` of the view's ``blocks[low:high]``, in one compiled call
        (:func:`~.keyindex.probe_tables`) over their slot tables in memory; ``None`` when a
        block's table is not held (it did not fit the cache): then ask block by block."""
        fd = self._open()
        if not self._probes:
            self._probes.append(self._plan(fd, blocks))
        plan = self._probes[0]
        return None if plan is None else keyindex.probe_tables(fd, plan[low:high], digest, self.base_offset)

    def _plan(self, fd: int, blocks: tuple[KeyBlock, ...]) -> tuple[keyindex.Probe, ...] | None:
        probes = []
        for block in blocks:
            place = block.place
            table = None if place is None else self._table(fd, place)
            if place is None or table is None:
                return None
            probes.append(as_probe(table, place))
        return tuple(probes)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def __enter__(self) -> KeyReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _version(segment: Segment) -> tuple[object, ...]:
    """The segment's file and its derived files' (inode, size): what a view depends on,
    with the log's size (kept apart: see :func:`index_view`)."""
    sizes: list[object] = [segment.log_path, segment.inode]
    for path in derived_paths(segment):
        try:
            st = os.stat(path)  # noqa: PTH116 (a str path, made once: see derived_paths)
            sizes += [st.st_ino, st.st_size]
        except FileNotFoundError:
            sizes += [None, None]
    return tuple(sizes)


@dataclass(frozen=True, slots=True)
class _Cached:
    view: IndexView
    log_size: int  # the segment's size when the view was loaded
    whole: bool  # every block of the three files is in the view


VIEWS: Kind[_Cached] = Kind("index view", 4096)
"""Views in the readers' cache, per file version (:func:`_version`)."""


def index_view(segment: Segment) -> IndexView:
    """The current view of ``segment``'s derived files (cached per file version).

    A view loaded from derived files that held nothing but the blocks it took stays
    right while the log only grows (an active segment of a busy partition grows between
    any two queries) and the derived files do not change: it is reused, so a reader does
    not re-read and re-check every block of the active segment per query. A view that
    left blocks out because they ended past the log's size then (a read-only opening
    whose size snapshot lags the indexer) is reloaded when the size changes.
    """
    files = _version(segment)
    size = segment.size
    cached = READERS.get(VIEWS, files)
    if cached is not None and (cached.log_size == size or (cached.whole and size > cached.log_size)):
        view = cached.view
        # the same files, maybe through another Segment object (a read-only refresh)
        return view if view.segment is segment else dataclasses.replace(view, segment=segment)
    view, whole = _load(segment, files)
    # an older, shorter opening does not evict
    READERS.put(VIEWS, files, _Cached(view, size, whole), replaces=lambda current: current.log_size <= size)
    return view


@dataclass(frozen=True, slots=True)
class _Checked:
    files: dict[int, CheckedBlocks]  # each file's valid blocks, CRCs checked
    view: IndexView  # the view made of them


CHECKED: Kind[_Checked] = Kind("checked blocks", 4096)
"""The blocks last checked per segment file (path, inode), with the view made of them:
a reload after the indexer added a block checks and decodes only the new blocks."""


def _load(segment: Segment, files: tuple[object, ...]) -> tuple[IndexView, bool]:
    """The view, and whether it took every block the three files held (their sizes as
    ``files`` gives them, stat'ed before the blocks were read). Blocks checked by the
    previous load of the same segment file are not checked again (:func:`read_blocks_after`)
    and the previous view's decoded blocks are reused for them."""
    previous = READERS.get(CHECKED, files[:2])
    checked = _read_files(segment, checked=None if previous is None else previous.files)
    blocks = _agreed(checked)
    file_sizes = files[3::2]
    whole = all(  # a missing file (None) holds no block
        valid_length(blocks[kind]) == (size or 0)
        for kind, size in zip((keyindex.KIND, skipindex.KIND, tagindex.KIND), file_sizes, strict=True)
    )
    view = _view(segment, blocks, None if previous is None else previous.view)
    READERS.put(CHECKED, files[:2], _Checked(checked, view))
    return view, whole


def _reusable(blocks: list[Block], view: IndexView | None, kind: int) -> int:
    """How many of the first ``blocks`` (of file ``kind``) are the very blocks ``view``
    was made of (the same objects: carried over by :func:`read_blocks_after`)."""
    if view is None:
        return 0
    old = (
        [kb.block for kb in view.key_blocks]
        if kind == keyindex.KIND
        else [sb.block for sb in view.skip_blocks]
    )
    n = 0
    while n < min(len(old), len(blocks)) and old[n] is blocks[n]:
        n += 1
    return n


def _view(segment: Segment, blocks: dict[int, list[Block]], previous: IndexView | None) -> IndexView:
    """The view of the agreed ``blocks``, reusing ``previous``'s decoded blocks (and the
    slot tables it fetched) for the blocks it was made of."""
    key_list = blocks[keyindex.KIND]
    if not key_list:
        return IndexView(segment, segment.base_offset, 0, (), ())
    old_keys = () if previous is None else previous.key_blocks
    old_skips = () if previous is None else previous.skip_blocks
    keep = min(
        _reusable(key_list, previous, keyindex.KIND),
        _reusable(blocks[skipindex.KIND], previous, skipindex.KIND),
    )
    key_blocks = list(old_keys[:keep])
    fd = os.open(derived_path(segment, keyindex.SUFFIX), os.O_RDONLY)
    try:
        start_pos = key_list[keep - 1].end_position if keep else 0
        for block in key_list[keep:]:
            names, counts_position = keyindex.read_names(fd, block)
            counts = keyindex.read_counts(fd, counts_position)
            place = BlockPlace(
                block.start_offset,
                block.end_offset,
                block.end_position,
                block.payload_position,
                block.payload_length,
                block.crc,
                counts_position,
                *counts,
                block.version >= keyindex.GROUPED_VERSION,
            )
            key_blocks.append(
                KeyBlock(
                    block.start_offset,
                    block.end_offset,
                    start_pos,
                    block.end_position,
                    names,
                    counts_position,
                    counts,
                    place,
                    block,
                )
            )
            start_pos = block.end_position
    finally:
        os.close(fd)
    first = key_list[keep - 1].end_position if keep else 0
    skip_blocks = old_skips[:keep] + _skip_blocks(segment, blocks[skipindex.KIND][keep:], first)
    tables = {} if previous is None else previous.slot_tables
    kept = {
        kb.counts_position: tables[kb.counts_position]
        for kb in old_keys[:keep]
        if kb.counts_position in tables
    }
    last = key_list[-1]
    return IndexView(segment, last.end_offset, last.end_position, tuple(key_blocks), skip_blocks, kept)


def _skip_blocks(segment: Segment, blocks: list[Block], start_pos: int) -> tuple[SkipBlock, ...]:
    """The ``.skip`` blocks ``blocks``, decoded; the first starts at log position ``start_pos``."""
    out = []
    fd = os.open(derived_path(segment, skipindex.SUFFIX), os.O_RDONLY)
    try:
        for block in blocks:
            summary = skipindex.decode_payload(os.pread(fd, block.payload_length, block.payload_position))
            out.append(
                SkipBlock(block.start_offset, block.end_offset, start_pos, block.end_position, summary, block)
            )
            start_pos = block.end_position
    finally:
        os.close(fd)
    return tuple(out)
