"""The indexer: resumes where it stopped, rebuilds what is missing or damaged, keeps up
with appends in a thread, and writes tag entries that agree with the log."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from logtrove.query import HeaderQuery, KeyQuery, QueryEngine
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.checkpoint import INDEX_OFFSET, CheckpointFile
from logtrove.storage.derived import keyindex, skipindex, tagindex
from logtrove.storage.derived.blockfile import read_blocks
from logtrove.storage.derived.indexer import Indexer, PartitionIndexer, build_segment_indexes
from logtrove.storage.derived.paths import derived_path
from logtrove.storage.derived.views import index_view
from logtrove.testing import wait_until

from .helpers import TOPIC, Dataset


def copy(dataset: Dataset, tmp_path: Path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(dataset.path, dst)
    return dst


def test_indexer_resumes_from_its_blocks_after_a_restart(dataset: Dataset, tmp_path: Path) -> None:
    path = copy(dataset, tmp_path)
    with Storage.open(path) as storage:
        log = storage.log(TOPIC, 0)
        first = PartitionIndexer(log, block_records=500)
        first.step(3_000)
        first.flush_tail()
        seg = log.segments[0]
        before = derived_path(seg, ".keyidx").read_bytes()
        covered = first.indexed_offset
    with Storage.open(path) as storage:
        log = storage.log(TOPIC, 0)
        second = PartitionIndexer(log, block_records=500)
        assert second.indexed_offset == log.segments[0].base_offset  # nothing visited yet
        second.step(10**9, flush_tail=True)
        assert second.indexed_offset == log.log_end_offset > covered
        after = derived_path(log.segments[0], ".keyidx").read_bytes()
        assert after.startswith(before)  # earlier blocks are kept, not rewritten


def test_torn_tail_and_missing_files_are_rebuilt(dataset: Dataset, tmp_path: Path) -> None:
    path = copy(dataset, tmp_path)
    with Storage.open(path) as storage:
        Indexer(storage).catch_up()
        log = storage.log(TOPIC, 1)
        a, b = log.segments[0], log.segments[1]
        with derived_path(a, ".keyidx").open("ab") as f:
            f.write(b"LTB1 half a block")
        derived_path(b, ".skip").unlink()
    with Storage.open(path) as storage:
        log = storage.log(TOPIC, 1)
        a, b = log.segments[0], log.segments[1]
        assert index_view(b).end_position == 0  # the three files no longer agree
        PartitionIndexer(log).step(10**9, flush_tail=True)
        for seg in (a, b):
            view = index_view(seg)
            assert (view.end_position, view.end_offset) == (seg.size, seg.next_offset)
            blocks = read_blocks(derived_path(seg, ".keyidx"), keyindex.KIND, seg.base_offset)
            assert derived_path(seg, ".keyidx").stat().st_size == blocks[-1].file_end


def test_checkpoint_records_how_far_each_partition_is_indexed(dataset: Dataset, tmp_path: Path) -> None:
    path = copy(dataset, tmp_path)
    with Storage.open(path) as storage:
        Indexer(storage).catch_up()
        expected = {(TOPIC, p): storage.log(TOPIC, p).log_end_offset for p in range(dataset.partitions)}
    assert CheckpointFile(path / INDEX_OFFSET).read() == expected


def test_tag_index_holds_one_entry_per_tagged_record(dataset: Dataset, tmp_path: Path) -> None:
    path = copy(dataset, tmp_path)
    with Storage.open(path) as storage:
        Indexer(storage, block_records=777).catch_up()
        log = storage.log(TOPIC, 2)
        for seg in log.segments:
            tags = tagindex.read_tag_index(derived_path(seg, ".tagidx"), seg.base_offset, "tag")
            assert tags.end_offset == seg.next_offset
            expected = [
                (r.offset, tagindex.tag_hash(v))
                for r in log.records(seg.base_offset, seg.next_offset)
                for k, v in r.headers
                if k == "tag" and v is not None
            ]
            assert tags.entries == expected


def test_skip_blocks_bound_timestamps_and_hold_every_token(dataset: Dataset, tmp_path: Path) -> None:
    path = copy(dataset, tmp_path)
    with Storage.open(path) as storage:
        Indexer(storage, block_records=1000).catch_up()
        log = storage.log(TOPIC, 0)
        for seg in log.segments[:3]:
            for sb in index_view(seg).skip_blocks:
                records = list(log.records(sb.start_offset, sb.end_offset))
                assert sb.summary.record_count == len(records)
                assert sb.summary.min_timestamp == min(r.timestamp for r in records)
                assert sb.summary.max_timestamp == max(r.timestamp for r in records)
                tokens = skipindex.tokens_of(r.value for r in records if r.value)
                assert all(sb.summary.may_contain(t) for t in tokens)


def test_cleaner_can_build_a_segments_files_in_one_call(dataset: Dataset, tmp_path: Path) -> None:
    path = copy(dataset, tmp_path)
    with Storage.open(path) as storage:
        seg = storage.log(TOPIC, 0).segments[0]
        build_segment_indexes(seg, storage.topic(TOPIC).config)
        view = index_view(seg)
        assert (view.end_offset, view.end_position) == (seg.next_offset, seg.size)


def test_header_indexed_only_later_is_still_found_in_older_blocks(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        log = storage.log("t", 0)
        for i in range(50):
            log.append(build_batch([NewRecord(b"v", b"k", (("shop", b"s%d" % (i % 3)),))]))
        Indexer(storage).catch_up()
        storage.alter_topic_configs("t", {"index.headers": "shop"})
        for i in range(50):
            log.append(build_batch([NewRecord(b"v", b"k", (("shop", b"s%d" % (i % 3)),))]))
        Indexer(storage).catch_up()
        names = [kb.names for kb in index_view(log.segments[0]).key_blocks]
        assert names == [("id",), ("id", "shop")]
        found = QueryEngine(storage).run(HeaderQuery("t", "shop", b"s1")).all()[0]
        assert [m.offset for m in found] == [o for o in range(99, -1, -1) if (o % 50) % 3 == 1]


def test_indexer_thread_follows_appends_and_queries_stay_complete(tmp_path: Path) -> None:
    with Storage.open(tmp_path, read_only=False) as storage:
        storage.create_topic("t", 2, {"segment.bytes": "50000"})
        indexer = Indexer(storage, block_records=100, idle_s=0.01, tail_flush_s=0.05)
        indexer.start()
        reader = Storage.open(tmp_path, read_only=True)
        engine = QueryEngine(reader)
        stop = threading.Event()
        try:
            for i in range(3_000):
                p = i % 2
                storage.log("t", p).append(build_batch([NewRecord(b"x%d" % i, b"k%d" % (i % 10))]))
                if i % 500 == 499:
                    found = engine.run(KeyQuery("t", b"k3")).all()[0]
                    assert len(found) == sum(1 for j in range(i + 1) if j % 10 == 3)
            # the thread catches up by itself; on a loaded machine it may still be seconds
            # behind when the appends end, and stop() does not drain (by design): wait, bounded
            wait_until(lambda: _caught_up(storage, indexer), 60, what="the indexer thread catching up")
        finally:
            stop.set()
            indexer.stop()
            reader.close()
        assert _caught_up(storage, indexer)


def _caught_up(storage: Storage, indexer: Indexer) -> bool:
    offsets = indexer.indexed_offsets()
    return len(offsets) == 2 and all(v == storage.log("t", p).log_end_offset for (_, p), v in offsets.items())


def test_indexer_child_process_follows_a_writer(tmp_path: Path) -> None:
    from logtrove.storage.derived.process import IndexerProcess

    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"segment.bytes": "40000"})
        log = storage.log("t", 0)
        child = IndexerProcess(tmp_path, block_records=200, idle_s=0.02, tail_flush_s=0.1)
        child.start()
        try:
            for i in range(2_000):
                log.append(build_batch([NewRecord(b"v%d" % i, b"k%d" % (i % 10))]))
            storage.flush_all()
            checkpoint = CheckpointFile(tmp_path / INDEX_OFFSET)
            wait_until(
                lambda: checkpoint.read().get(("t", 0)) == log.log_end_offset,
                60,
                interval_s=0.1,
                what="the child's checkpoint reaching the log end",
            )
        finally:
            child.stop()
        assert checkpoint.read()[("t", 0)] == 2_000
        for seg in log.segments:
            view = index_view(seg)
            assert (view.end_offset, view.end_position) == (seg.next_offset, seg.size)
        found = QueryEngine(storage).run(KeyQuery("t", b"k7")).all()[0]
        assert [m.offset for m in found] == list(range(1997, -1, -10))


def test_compaction_writes_fresh_index_files_and_key_queries_stay_exact(tmp_path: Path) -> None:
    from logtrove.storage.cleaner import Cleaner

    with Storage.open(tmp_path) as storage:
        storage.create_topic("kv", 1, {"cleanup.policy": "compact", "segment.bytes": "20000"})
        log = storage.log("kv", 0)
        for i in range(3_000):
            log.append(build_batch([NewRecord(b"v%d" % i, b"k%d" % (i % 40), (("id", b"m%d" % i),))]))
        Indexer(storage).catch_up()
        Cleaner(storage).clean_until_caught_up(log)
        for seg in log.segments:
            view = index_view(seg)
            assert (view.end_offset, view.end_position) == (seg.next_offset, seg.size)
        engine = QueryEngine(storage)
        for k in (b"k0", b"k17", b"k39"):
            want = [r.offset for r in log.records() if r.key == k][::-1]
            assert [m.offset for m in engine.run(KeyQuery("kv", k)).all()[0]] == want


def test_a_new_backlog_waits_defer_s_then_is_parsed_without_pause(tmp_path: Path) -> None:
    """With ``defer_s`` the indexer leaves records alone until the oldest is that old (a
    producer's burst ends first), then parses until caught up, records arriving meanwhile
    included; once caught up, the next backlog waits again."""
    now = [100.0]
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        log = storage.log("t", 0)
        indexer = Indexer(storage, block_records=50, tail_flush_s=5.0, defer_s=1.0, monotonic=lambda: now[0])
        assert indexer.run_due() is None  # nothing to parse: an idle wait
        now[0] += 0.5  # the empty log started no deferral: the records below start it
        for i in range(120):
            log.append(build_batch([NewRecord(b"v%d" % i, b"k%d" % i)]))
        assert indexer.run_due() is None
        now[0] += 0.9
        assert indexer.run_due() is None
        assert indexer.indexed_offsets().get(("t", 0), 0) == 0
        now[0] += 0.2  # the backlog is 1.1 s old
        assert indexer.run_due() == 120
        log.append(build_batch([NewRecord(b"late", b"k")]))
        assert indexer.run_due() == 1  # still behind since the deferral: no new wait
        assert indexer.run_due() == 0  # caught up
        log.append(build_batch([NewRecord(b"next", b"k")]))
        assert indexer.run_due() is None  # a new backlog waits again
        now[0] += 5.0  # the tail flush is due: it runs, deferral or not
        assert indexer.run_due() == 1
        assert indexer.indexed_offsets()[("t", 0)] == 122


def test_defer_s_is_capped_by_the_tail_flush_interval_and_zero_parses_at_once(tmp_path: Path) -> None:
    now = [0.0]
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        storage.log("t", 0).append(build_batch([NewRecord(b"v", b"k")]))
        assert Indexer(storage, tail_flush_s=0.5, defer_s=3.0).defer_s == 0.5
        assert Indexer(storage, tail_flush_s=5.0, monotonic=lambda: now[0]).run_due() == 1


def test_a_deferring_child_still_indexes_everything(tmp_path: Path) -> None:
    """The broker's child defers a new backlog (``defer_s``) and then catches up."""
    from logtrove.storage.derived.process import IndexerProcess

    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        log = storage.log("t", 0)
        child = IndexerProcess(tmp_path, idle_s=0.02, tail_flush_s=0.5, defer_s=0.2)
        child.start()
        try:
            for i in range(500):
                log.append(build_batch([NewRecord(b"v%d" % i, b"k%d" % (i % 10))]))
            storage.flush_all()
            checkpoint = CheckpointFile(tmp_path / INDEX_OFFSET)
            wait_until(
                lambda: checkpoint.read().get(("t", 0)) == 500, 60, what="the child's checkpoint reaching 500"
            )
        finally:
            child.stop()
        assert checkpoint.read()[("t", 0)] == 500
        found = QueryEngine(storage).run(KeyQuery("t", b"k7")).all()[0]
        assert [m.offset for m in found] == list(range(497, -1, -10))
