"""Key lookups through slot tables held in memory (:mod:`logtrove.storage.derived.slottables`)
answer exactly what a brute-force scan of the log answers, whatever happened to the files
since the tables were cached: new blocks, a compaction swap, a truncation, deleted
segments, a damaged ``.keyidx``.

Every lookup below runs after an earlier lookup cached the tables of the blocks it
probed, so a table served for a block it does not belong to (a replaced file reusing the
path, the same place in a rewritten file) would send the walk down a wrong chain and lose
records.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logtrove.query import KeyQuery, QueryEngine
from logtrove.records import NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.storage.cleaner import Cleaner
from logtrove.storage.derived import keyindex, slottables
from logtrove.storage.derived.cache import READERS, Kind, ReaderCache
from logtrove.storage.derived.indexer import Indexer, PartitionIndexer
from logtrove.storage.derived.paths import derived_path
from logtrove.storage.derived.slottables import SLOT_TABLES, TableKey, is_stale, slot_table
from logtrove.storage.derived.views import index_view
from logtrove.storage.truncate import truncate_partition
from logtrove.testing.old_formats import rewrite_as_version_3

KEYS = [b"k%d" % i for i in range(12)]


def append(log: PartitionLog, keys: list[bytes], start: int) -> None:
    for i, key in enumerate(keys):
        log.append(build_batch([NewRecord(b"v%d" % (start + i), key, (("id", b"m%d" % (start + i)),))]))


def brute_force(log: PartitionLog, key: bytes) -> list[int]:
    return [r.offset for r in log.records() if r.key == key][::-1]


def assert_lookups_exact(storage: Storage, topic: str, log: PartitionLog) -> None:
    engine = QueryEngine(storage)
    for key in KEYS:
        assert [m.offset for m in engine.run(KeyQuery(topic, key)).all()[0]] == brute_force(log, key), key


def cached_tables() -> int:
    return len(READERS.keys(SLOT_TABLES))


def indexed_log(storage: Storage) -> PartitionLog:
    """Topic ``t``: 900 records over several segments, indexed in blocks of 100; the
    readers' cache emptied."""
    storage.create_topic("t", 1, {"segment.bytes": "30000"})
    log = storage.log("t", 0)
    append(log, [KEYS[i % 7 * i % len(KEYS)] for i in range(900)], 0)
    PartitionIndexer(log, block_records=100).step(10**9, flush_tail=True)
    READERS.clear()
    return log


def test_lookups_read_slots_from_cached_tables_and_stay_exact(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        log = indexed_log(storage)
        assert_lookups_exact(storage, "t", log)
        blocks = sum(len(index_view(seg).key_blocks) for seg in log.segments)
        assert blocks > 5 and cached_tables() == blocks
        assert_lookups_exact(storage, "t", log)  # every slot from memory now


def test_lookups_stay_exact_when_only_some_tables_fit_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment whose blocks' tables do not all fit is probed block by block, the blocks
    that fit from memory, the others through the file; where all fit, every block in one
    compiled call: the same answers."""
    with Storage.open(tmp_path) as storage:
        log = indexed_log(storage)
        one_table = len(slot_table_of(log))
        monkeypatch.setattr(slottables, "SLOT_TABLES", Kind("slot tables", 3 * one_table))
        assert_lookups_exact(storage, "t", log)
        plans = [index_view(seg).probes for seg in log.segments]
        assert [None] in plans and any(p and p[0] is not None for p in plans)  # some whole, some not
        assert_lookups_exact(storage, "t", log)


def slot_table_of(log: PartitionLog) -> bytes:
    """The slot table of the first key block of ``log``, read from its file."""
    view = index_view(log.segments[0])
    place = view.key_blocks[0].place
    assert place is not None
    path = derived_path(log.segments[0], keyindex.SUFFIX)
    fd = os.open(path, os.O_RDONLY)
    try:
        table = slot_table(fd, str(path), os.fstat(fd).st_ino, place)
    finally:
        os.close(fd)
    assert table is not None
    READERS.clear()
    return table


def test_a_compaction_swap_replaces_the_tables_of_the_rewritten_segments(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("kv", 1, {"cleanup.policy": "compact", "segment.bytes": "20000"})
        log = storage.log("kv", 0)
        append(log, [KEYS[i % len(KEYS)] for i in range(1_500)], 0)
        Indexer(storage).catch_up()
        assert_lookups_exact(storage, "kv", log)  # tables of the files before the swap
        Cleaner(storage).clean_until_caught_up(log)
        Indexer(storage).catch_up()  # fresh files for the swapped segments, blocks at the same places
        assert_lookups_exact(storage, "kv", log)


def test_a_truncation_and_new_appends_at_the_same_offsets_are_found(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"segment.bytes": "40000"})
        log = storage.log("t", 0)
        append(log, [KEYS[i % 5] for i in range(800)], 0)
        PartitionIndexer(log, block_records=60).step(10**9, flush_tail=True)
        assert_lookups_exact(storage, "t", log)
        end = truncate_partition(storage, "t", 0, 500)
        append(log, [KEYS[5 + i % 7] for i in range(300)], end)  # other keys at the same offsets
        PartitionIndexer(log, block_records=60).step(10**9, flush_tail=True)
        assert_lookups_exact(storage, "t", log)


def test_tables_of_deleted_segments_make_room_and_lookups_stay_exact(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"segment.bytes": "20000"})
        log = storage.log("t", 0)
        append(log, [KEYS[i % 9] for i in range(1_000)], 0)
        PartitionIndexer(log, block_records=80).step(10**9, flush_tail=True)
        assert_lookups_exact(storage, "t", log)
        first = log.segments[0]
        path = str(derived_path(first, keyindex.SUFFIX))
        deleted = [k for k in READERS.keys(SLOT_TABLES) if isinstance(k, TableKey) and k.path == path]
        assert deleted
        log.truncate_before(log.segments[2].base_offset)
        assert all(is_stale(k) for k in deleted)
        assert_lookups_exact(storage, "t", log)


def test_a_damaged_key_index_is_scanned_past_and_its_cached_tables_are_not_served(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        log = storage.log("t", 0)
        append(log, [KEYS[i % 11] for i in range(600)], 0)
        PartitionIndexer(log, block_records=50).step(10**9, flush_tail=True)
        assert_lookups_exact(storage, "t", log)
        seg = log.segments[-1]
        view = index_view(seg)
        path = derived_path(seg, keyindex.SUFFIX)
        place = view.key_blocks[3].place
        assert place is not None
        with path.open("r+b") as f:  # the fourth block's table: its CRC no longer matches
            f.seek(place.counts_position + 8)
            f.write(b"\xff" * (4 * place.slots))
        os.truncate(path, view.key_blocks[-1].counts_position)  # and the last block is cut short
        assert len(index_view(seg).key_blocks) == 3
        assert_lookups_exact(storage, "t", log)


def test_a_table_whose_block_header_disagrees_with_the_view_is_not_cached(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        log = storage.log("t", 0)
        append(log, [KEYS[i % 3] for i in range(100)], 0)
        PartitionIndexer(log, block_records=50).step(10**9, flush_tail=True)
        seg = log.segments[-1]
        place = index_view(seg).key_blocks[0].place
        assert place is not None
        path = str(derived_path(seg, keyindex.SUFFIX))
        fd = os.open(path, os.O_RDONLY)
        try:
            READERS.clear()
            inode = os.fstat(fd).st_ino
            assert slot_table(fd, path, inode, place._replace(crc=place.crc ^ 1)) is None
            assert slot_table(fd, path, inode, place._replace(entries=place.entries + 1)) is None
            assert cached_tables() == 0
            table = slot_table(fd, path, inode, place)
            assert table is not None and len(table) == 4 * place.slots
        finally:
            os.close(fd)


def test_room_is_made_from_stale_entries_only(tmp_path: Path) -> None:
    cache = ReaderCache()
    kind: Kind[bytes] = Kind("tables", 10)
    live, gone = tmp_path / "live", tmp_path / "gone"
    live.write_bytes(b"x")
    gone.write_bytes(b"x")
    live_key = TableKey(str(live), live.stat().st_ino, 40, 1)
    gone_key = TableKey(str(gone), gone.stat().st_ino, 40, 2)
    assert cache.put_if_room(kind, gone_key, b"g", 4, stale=is_stale)
    assert cache.put_if_room(kind, live_key, b"l", 4, stale=is_stale)
    assert not cache.put_if_room(
        kind, TableKey(str(live), live.stat().st_ino, 80, 3), b"n", 4, stale=is_stale
    )
    gone.unlink()  # its entry is the least recently used and stale: it makes room
    assert cache.put_if_room(kind, TableKey(str(live), live.stat().st_ino, 80, 3), b"n", 4, stale=is_stale)
    assert cache.get(kind, gone_key) is None and cache.get(kind, live_key) == b"l"


def test_a_live_least_recently_used_entry_is_never_evicted(tmp_path: Path) -> None:
    cache = ReaderCache()
    kind: Kind[bytes] = Kind("tables", 5)
    live = tmp_path / "live"
    live.write_bytes(b"x")
    key = TableKey(str(live), live.stat().st_ino, 40, 1)
    assert cache.put_if_room(kind, key, b"l", 5, stale=is_stale)
    assert not cache.put_if_room(kind, key._replace(crc=9), b"m", 1, stale=is_stale)
    assert cache.get(kind, key) == b"l"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.lists(st.integers(0, len(KEYS) - 1), min_size=1, max_size=150)),
            st.tuples(st.just("index"), st.integers(10, 120)),
            st.tuples(st.just("truncate"), st.integers(0, 100)),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_lookups_equal_a_brute_force_scan_after_any_appends_indexing_and_truncations(
    steps: list[tuple[str, object]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp, Storage.open(Path(tmp)) as storage:
        storage.create_topic("t", 1, {"segment.bytes": "6000"})
        log = storage.log("t", 0)
        for op, arg in steps:
            if op == "append":
                assert isinstance(arg, list)
                append(log, [KEYS[i] for i in arg], log.log_end_offset)
            elif op == "index":
                assert isinstance(arg, int)
                PartitionIndexer(log, block_records=arg).step(10**9, flush_tail=True)
            else:
                assert isinstance(arg, int)
                truncate_partition(storage, "t", 0, log.log_end_offset * arg // 100)
            assert_lookups_exact(storage, "t", log)


@pytest.mark.parametrize("cached", [True, False])
def test_an_index_an_older_version_began_is_read_and_continued_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached: bool
) -> None:
    """Key blocks of version 3 (chained entries), as an older logtrove left them, then
    blocks of version 4 (grouped by slot) appended to the same files by this indexer:
    every lookup equals a brute-force scan, with the slot tables in memory or not."""
    if not cached:
        monkeypatch.setattr(slottables, "SLOT_TABLES", Kind("slot tables", 0))
    with Storage.open(tmp_path) as storage:
        log = indexed_log(storage)
        rewritten = sum(
            rewrite_as_version_3(derived_path(seg, keyindex.SUFFIX), seg.base_offset) for seg in log.segments
        )
        READERS.clear()
        assert rewritten > 5
        assert_lookups_exact(storage, "t", log)
        append(log, [KEYS[i * 5 % len(KEYS)] for i in range(300)], log.log_end_offset)
        PartitionIndexer(log, block_records=100).step(10**9, flush_tail=True)
        READERS.clear()
        active = log.segments[-1]
        versions = {kb.block.version for kb in index_view(active).key_blocks if kb.block is not None}
        assert versions == {3, 4} or len(log.segments) > 3  # the newest segment holds both, or rolled
        every = {kb.block.version for seg in log.segments for kb in index_view(seg).key_blocks if kb.block}
        assert every == {3, 4}
        assert_lookups_exact(storage, "t", log)
        assert_lookups_exact(storage, "t", log)  # again, from what the first lookups cached
