"""The per-segment transaction files (storage/txnindex.py, storage/txnload.py): the
``.txnindex`` written at each abort, the snapshot written at each roll, a start that reads
those instead of the log, and hostile or missing files rebuilt by a longer walk.

Bytes read are measured with the process's ``rchar`` (/proc/self/io): every ``read`` and
``pread`` the load makes, whatever the page cache holds."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.txn.txn_log import Writer, brute_force_visible, data_offsets, rchar, workload

from logtrove.storage import Storage
from logtrove.storage.txnindex import (
    AbortedTxn,
    read_snapshot,
    read_txn_index,
    snapshot_path,
    txn_index_path,
)
from logtrove.storage.txnview import committed_view
from logtrove.txn import PartitionTxns, TxnIndexes
from logtrove.txn.partition import load, scan

TOPIC = "t"


def short_transactions(w: Writer, rng: random.Random, rounds: int) -> None:
    """Transactions of a few batches each, two producers interleaved, one in three aborted,
    with plain data between: the usual shape, whose aborted spans are a small part of the
    log."""
    for _ in range(rounds):
        a, b = rng.sample(range(1, 9), 2)
        w.data(a)
        w.data(b)
        w.data(a)
        w.marker(a, commit=rng.random() < 0.67)
        w.marker(b, commit=True)
        w.data(-1, rng.randrange(5, 30))
    w.data(3)  # left open


def same_state(a: PartitionTxns, b: PartitionTxns) -> None:
    assert a.open == b.open
    assert a.aborted == b.aborted
    assert a.walked_to == b.walked_to


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    with Storage.open(tmp_path / "data") as opened:
        opened.create_topic(TOPIC, 1, {"segment.bytes": "20000"})
        yield opened


def test_abort_appends_an_entry_to_the_markers_segment_index(storage: Storage) -> None:
    log = storage.log(TOPIC, 0)
    w = Writer(log, TxnIndexes())
    first = w.data(7).start
    w.data(8)
    abort = w.marker(7, commit=False)
    w.marker(8, commit=True)
    assert read_txn_index(log.active) == [AbortedTxn(7, first, abort)]
    assert read_txn_index(log.active)[0].last_stable_offset == first + 3  # producer 8 was still open
    assert txn_index_path(log.active).stat().st_size == 34


def test_roll_writes_the_new_segments_snapshot_and_seals_the_index(storage: Storage) -> None:
    log = storage.log(TOPIC, 0)
    w = Writer(log, TxnIndexes())
    opened = w.data(3).start
    while len(log.segments) < 3:
        w.data(-1, 20)
    sealed, later = log.segments[0], log.segments[1]
    assert read_txn_index(sealed) == []  # no abort there: an empty index, not a missing one
    assert read_snapshot(log.directory, later.base_offset) == {3: opened}


def test_restart_reads_the_files_not_the_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic(TOPIC, 1, {"segment.bytes": "100000"})
        log = storage.log(TOPIC, 0)
        workload(Writer(log, TxnIndexes()), random.Random(5), 6_000)
        size = log.size_bytes
        assert len(log.segments) > 10
    with Storage.open(data) as storage:
        log = storage.log(TOPIC, 0)
        before = rchar()
        loaded = load(log)
        read = rchar() - before
        assert loaded.walk_start == log.active.base_offset
        assert read < log.active.size + 64_000, (read, size)  # the active segment and small files
        same_state(loaded, scan(log))  # what a walk of every batch finds
        assert loaded.aborted and loaded.open

        view = committed_view(log)  # whatever the spans of the aborted transactions
        assert [o for o in data_offsets(log) if view.visible(o)] == brute_force_visible(log)


def test_a_reader_after_a_restart_reads_the_files_and_the_aborted_spans(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic(TOPIC, 1, {"segment.bytes": "100000"})
        log = storage.log(TOPIC, 0)
        short_transactions(Writer(log, TxnIndexes()), random.Random(7), 1_000)
        size = log.size_bytes
        assert len(log.segments) > 10
    with Storage.open(data, read_only=True) as storage:
        log = storage.log(TOPIC, 0)
        before = rchar()
        view = committed_view(log)
        read = rchar() - before
        assert read < size / 3, (read, size)
        assert view.last_stable_offset < log.log_end_offset
        assert [o for o in data_offsets(log) if view.visible(o)] == brute_force_visible(log)


def test_damaged_and_missing_files_are_rebuilt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic(TOPIC, 1, {"segment.bytes": "100000"})
        log = storage.log(TOPIC, 0)
        workload(Writer(log, TxnIndexes()), random.Random(9), 3_000)
        segs = log.segments
        assert len(segs) > 5
        with_entries = [s for s in segs[:-1] if read_txn_index(s)]
        assert with_entries
        damaged = with_entries[0]
        txn_index_path(damaged).write_bytes(txn_index_path(damaged).read_bytes()[:-5])  # torn entry
        txn_index_path(with_entries[-1]).unlink()
        with txn_index_path(segs[1]).open("r+b") as f:  # far larger than its segment could need
            f.truncate(1 << 40)
        snapshot_path(log.directory, segs[-1].base_offset).write_bytes(b"LTTS" + b"\xff" * 40)
        snapshot_path(log.directory, segs[-2].base_offset).write_bytes(b"")
    with Storage.open(data) as storage:
        log = storage.log(TOPIC, 0)
        same_state(load(log), scan(log))
        TxnIndexes().get(log)  # the broker's load repairs what it walked
        assert txn_index_path(segs[1]).stat().st_size < 1 << 20
        before = rchar()
        loaded = load(log)
        assert rchar() - before < log.active.size + 64_000
        same_state(loaded, scan(log))


def test_unclean_shutdown_distrusts_the_files_of_recovered_segments(tmp_path: Path) -> None:
    data = tmp_path / "data"
    storage = Storage.open(data)
    storage.create_topic(TOPIC, 1, {"segment.bytes": "20000"})
    log = storage.log(TOPIC, 0)
    w = Writer(log, TxnIndexes())
    workload(w, random.Random(3), 800)
    log.flush()
    first = w.data(42).start
    abort = w.marker(42, commit=False)
    while log.active.base_offset <= abort:  # the marker's segment sealed
        w.data(-1, 20)
    marked = next(s for s in log.segments if s.base_offset <= abort < s.next_offset)
    txn_index_path(marked).write_bytes(b"")  # stale: as if written before the abort and lost
    storage.abandon()
    with Storage.open(data) as reopened:
        log = reopened.log(TOPIC, 0)
        assert log.trusted_to < log.log_end_offset
        loaded = load(log)
        assert AbortedTxn(42, first, abort) in loaded.aborted
        same_state(loaded, scan(log))


def test_retention_deletes_the_files_with_their_segment(storage: Storage) -> None:
    log = storage.log(TOPIC, 0)
    w = Writer(log, TxnIndexes())
    w.data(1)
    w.marker(1, commit=False)
    while len(log.segments) < 4:
        w.data(-1, 20)
    gone = log.segments[:2]
    paths = [txn_index_path(s) for s in gone] + [snapshot_path(log.directory, gone[1].base_offset)]
    assert all(p.exists() for p in paths)
    log.truncate_before(log.segments[2].base_offset)
    log.purge_deleted(force=True)
    assert not any(p.exists() for p in paths)
    assert not list(log.directory.glob("*.deleted"))


def test_a_clean_shutdowns_end_snapshot_leaves_nothing_to_walk(tmp_path: Path) -> None:
    data = tmp_path / "data"
    indexes = TxnIndexes()
    with Storage.open(data) as storage:
        storage.create_topic(TOPIC, 1, {"segment.bytes": "1000000"})  # one large active segment
        log = storage.log(TOPIC, 0)
        workload(Writer(log, indexes), random.Random(11), 3_000)
        end = log.log_end_offset
        assert len(log.segments) <= 2 and log.active.size > 200_000
    indexes.write_end_snapshots()  # as the broker's stop does, after storage closed
    assert snapshot_path(log.directory, end).exists()
    with Storage.open(data, read_only=True) as storage:  # a reader: files only
        log = storage.log(TOPIC, 0)
        view = committed_view(log)  # (the aborted spans cover most of this log: read whole)
        assert [o for o in data_offsets(log) if view.visible(o)] == brute_force_visible(log)
    with Storage.open(data) as storage:
        log = storage.log(TOPIC, 0)
        before = rchar()
        loaded = load(log)
        assert rchar() - before < 64_000
        assert loaded.walk_start == end
        same_state(loaded, scan(log))
        assert not snapshot_path(log.directory, end).exists()  # used once: it names no segment
        w = Writer(log, TxnIndexes())
        w.data(1)
        w.marker(1, commit=False)
        same_state(load(log), scan(log))  # the next start walks from the segment's base again
