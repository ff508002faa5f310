"""A segment's index view is reused while only its log grows (a busy active segment
grows between any two queries; reloading checked every block again), and reloaded when
a derived file changes or when the view had left out blocks past the log's size."""

from __future__ import annotations

from pathlib import Path

from logtrove.query import KeyQuery, QueryEngine
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.derived import keyindex
from logtrove.storage.derived.indexer import PartitionIndexer
from logtrove.storage.derived.paths import derived_path
from logtrove.storage.derived.views import index_view


def append(storage: Storage, n: int, start: int = 0) -> None:
    log = storage.log("t", 0)
    for i in range(start, start + n):
        log.append(build_batch([NewRecord(b"v%d" % i, b"k%d" % (i % 5))]))


def test_the_view_is_reused_while_the_log_grows_and_reloaded_when_the_files_change(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        append(storage, 40)
        log = storage.log("t", 0)
        indexer = PartitionIndexer(log, block_records=10)
        indexer.step(10**9, flush_tail=True)
        seg = log.segments[-1]
        first = index_view(seg)
        assert first.end_position == seg.size
        append(storage, 7, start=40)  # the log grows; the derived files do not
        again = index_view(seg)
        assert again.key_blocks is first.key_blocks  # not loaded again
        assert again.end_position < seg.size  # the new records are the unindexed tail
        indexer.step(10**9, flush_tail=True)  # a new block: the files changed
        fresh = index_view(seg)
        assert fresh.key_blocks is not first.key_blocks
        assert fresh.end_position == seg.size


def test_a_reader_whose_size_snapshot_lagged_the_indexer_sees_the_blocks_later(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        append(storage, 30)
        reader = Storage.open(tmp_path, read_only=True)
        try:
            old = reader.log("t", 0).segments[-1]  # its size is that of 30 records
            append(storage, 30, start=30)
            PartitionIndexer(storage.log("t", 0), block_records=10).step(10**9, flush_tail=True)
            lagging = index_view(old)
            assert lagging.end_position <= old.size < storage.log("t", 0).segments[-1].size
            reader.refresh()
            current = reader.log("t", 0).segments[-1]
            assert index_view(current).end_position == current.size  # blocks past the old size now count
        finally:
            reader.close()


def test_a_reload_after_a_new_block_checks_and_decodes_only_the_new_blocks(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        append(storage, 40)
        log = storage.log("t", 0)
        indexer = PartitionIndexer(log, block_records=10)
        indexer.step(10**9, flush_tail=True)
        seg = log.segments[-1]
        first = index_view(seg)
        assert len(first.key_blocks) == 4
        append(storage, 20, start=40)
        indexer.step(10**9, flush_tail=True)
        fresh = index_view(seg)
        assert len(fresh.key_blocks) == 6 and fresh.end_position == seg.size
        assert all(a is b for a, b in zip(first.key_blocks, fresh.key_blocks[:4], strict=True))
        assert all(a is b for a, b in zip(first.skip_blocks, fresh.skip_blocks[:4], strict=True))
        assert [(b.start_position, b.end_position) for b in fresh.key_blocks] == [
            (b.start_position, b.end_position) for b in fresh.skip_blocks
        ]
        assert fresh.key_blocks[4].start_position == fresh.key_blocks[3].end_position
        found = QueryEngine(storage).run(KeyQuery("t", b"k3")).all()[0]
        assert [m.offset for m in found] == list(range(58, -1, -5))


def test_blocks_of_a_replaced_key_index_are_checked_again(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        append(storage, 40)
        log = storage.log("t", 0)
        PartitionIndexer(log, block_records=10).step(10**9, flush_tail=True)
        seg = log.segments[-1]
        view = index_view(seg)
        assert len(view.key_blocks) == 4
        path = derived_path(seg, keyindex.SUFFIX)
        raw = bytearray(path.read_bytes())
        raw[view.key_blocks[1].counts_position] ^= 0xFF  # the second block fails its CRC now
        replacement = path.with_name("replacement")
        replacement.write_bytes(bytes(raw) + b"\0")  # another file (inode), another size
        replacement.replace(path)
        assert len(index_view(seg).key_blocks) == 1
        found = QueryEngine(storage).run(KeyQuery("t", b"k3")).all()[0]
        assert [m.offset for m in found] == list(range(38, -1, -5))
