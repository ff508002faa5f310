"""Compaction of a partition with transactions (storage/cleaner/txn.py), checked against
a brute force over the log and its markers: a read_committed consumer sees the same
latest committed record per key before and after every round; aborted data is gone;
records at or past the last stable offset are not touched; a marker is kept while data
of its transaction remains and dropped one delete horizon after."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tests.cleaner.helpers import open_compacted
from tests.cleaner.txn_workload import RETENTION_MS, Writer, workload

from logtrove.records import marker_type
from logtrove.storage import PartitionLog
from logtrove.storage.cleaner import clean_partition
from logtrove.storage.txnindex import read_txn_index
from logtrove.storage.txnview import _Cache
from logtrove.testing import FakeClock
from logtrove.txn import TxnIndexes
from logtrove.txn.partition import load


def committed_latest(log: PartitionLog) -> dict[bytes, tuple[int, bytes | None]]:
    """Brute force: every batch decoded, the markers applied as a read_committed consumer
    does, up to the last stable offset; the latest record per key."""
    pending: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
    visible: list[tuple[int, bytes, bytes | None]] = []
    for header, data in log.batches(0):
        if header.is_control:
            kind = marker_type(data, header)
            if kind is not None and header.producer_id in pending:
                batch = pending.pop(header.producer_id)
                if kind == 1:
                    visible.extend(batch)
            continue
        records = [
            (r.offset, r.key or b"", r.value) for r in log.records(header.base_offset, header.next_offset)
        ]
        if header.is_transactional:
            pending.setdefault(header.producer_id, []).extend(records)
        else:
            visible.extend(records)
    lso = min((batch[0][0] for batch in pending.values() if batch), default=log.log_end_offset)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in sorted(visible):
        if offset < lso:
            latest[key] = (offset, value)
    return latest


def values(latest: dict[bytes, tuple[int, bytes | None]]) -> dict[bytes, bytes | None]:
    return {k: v for k, (_, v) in latest.items()}


def markers(log: PartitionLog) -> list[int]:
    return [h.base_offset for h, _ in log.batches(0) if h.is_control]


def test_rounds_keep_the_committed_latest_per_key_and_remove_aborted_data(tmp_path: Path) -> None:
    for seed in range(4):
        clock = FakeClock(1_000_000)
        storage, log = open_compacted(
            tmp_path / f"d{seed}",
            clock,
            **{"delete.retention.ms": str(RETENTION_MS), "segment.bytes": "4096"},
        )
        with storage:
            w = Writer(log, clock)
            first_open = workload(w, random.Random(seed), 400)
            expected = committed_latest(log)
            tail = [(h.base_offset, d) for h, d in log.batches(first_open)]
            aborted_before = _aborted_data_batches(log)
            assert aborted_before
            for _round in range(4):
                stats = clean_partition(log, first_dirty=0, now_ms=clock.now_ms(), budget_bytes=1 << 20)
                assert stats.first_uncleanable <= first_open
                assert values(committed_latest(log)) == values(expected)
                assert [(h.base_offset, d) for h, d in log.batches(first_open)] == tail  # never cleaned
                assert _aborted_data_batches(log) == []
                view = _Cache().view(log)  # a fresh reader, from the files the cleaner wrote
                assert [s for s in log.segments[:-1] if read_txn_index(s) is None] == []
                latest = committed_latest(log)
                assert all(view.visible(offset) for offset, _ in latest.values())
                clock.advance(RETENTION_MS + 1)
            w.marker(9, commit=True)  # the open transaction ends: now it may be cleaned
            expected = committed_latest(log)
            for _round in range(3):
                clean_partition(log, first_dirty=0, now_ms=clock.now_ms(), budget_bytes=1 << 20)
                assert values(committed_latest(log)) == values(expected)
                clock.advance(RETENTION_MS + 1)


def _aborted_data_batches(log: PartitionLog) -> list[int]:
    """Base offsets of data batches of aborted transactions, from the markers (brute force)."""
    pending: dict[int, list[int]] = {}
    out: list[int] = []
    for header, data in log.batches(0):
        if header.is_control:
            kind = marker_type(data, header)
            batch = pending.pop(header.producer_id, [])
            if kind == 0:
                out.extend(batch)
        elif header.is_transactional:
            pending.setdefault(header.producer_id, []).append(header.base_offset)
    return out


def test_markers_stay_while_data_remains_then_one_horizon(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    storage, log = open_compacted(tmp_path / "d", clock, **{"delete.retention.ms": str(RETENTION_MS)})
    with storage:
        w = Writer(log, clock)
        w.data(1, [1], "aborted")
        w.marker(1, commit=False)
        w.data(2, [2], "committed")
        w.marker(2, commit=True)
        w.data(3, [3], "overwritten")
        w.marker(3, commit=True)
        w.data(-1, [3], "newer")
        for n in range(40):
            w.data(-1, [100 + n], "filler" * 20)
        abort, commit_kept, commit_gone = markers(log)[:3]

        def clean() -> None:
            clean_partition(log, first_dirty=0, now_ms=clock.now_ms(), budget_bytes=1 << 20)

        clean()  # aborted data removed; its marker kept this round (its data was met)
        assert {abort, commit_kept, commit_gone} <= set(markers(log))
        clean()  # no data of 1 and 3 left: their markers get a horizon, and stay
        assert {abort, commit_kept, commit_gone} <= set(markers(log))
        clock.advance(RETENTION_MS - 1)
        clean()
        assert {abort, commit_kept, commit_gone} <= set(markers(log))
        clock.advance(2)
        clean()  # past the horizon: gone, but the commit of a transaction whose data remains stays
        assert abort not in markers(log) and commit_gone not in markers(log)
        assert commit_kept in markers(log)
        assert values(committed_latest(log))[b"k2"] == b"committed-2"
        assert all(read_txn_index(s) == [] for s in log.segments[:-1])


class CrashError(Exception):
    """Raised by the fault hook to stop a swap half-way."""


@pytest.mark.parametrize("step", ["manifest-written", "swap-committed", "old-deleted", "renamed-final"])
def test_a_crash_in_the_swap_leaves_consistent_transaction_files(tmp_path: Path, step: str) -> None:
    clock = FakeClock(1_000_000)
    settings = {"delete.retention.ms": str(RETENTION_MS), "segment.bytes": "4096"}
    storage, log = open_compacted(tmp_path / "d", clock, **settings)
    w = Writer(log, clock)
    workload(w, random.Random(21), 300)
    w.marker(9, commit=True)
    w.data(-1, [0], "last")
    expected = values(committed_latest(log))

    def fault(at: str) -> None:
        if at == step:
            raise CrashError(at)

    with pytest.raises(CrashError):
        clean_partition(log, first_dirty=0, now_ms=clock.now_ms(), budget_bytes=1 << 20, fault=fault)
    storage.abandon()
    storage, log = open_compacted(tmp_path / "d", clock, **settings)
    with storage:
        assert values(committed_latest(log)) == expected
        loaded = load(log)  # from the files the swap left, rebuilt where it must be
        view = _Cache().view(log)
        latest = committed_latest(log)
        assert all(view.visible(offset) for offset, _ in latest.values())
        assert not {a.last_offset for a in loaded.aborted} - set(markers(log))  # no entry without its marker
        clean_partition(log, first_dirty=0, now_ms=clock.now_ms(), budget_bytes=1 << 20)
        assert values(committed_latest(log)) == expected and _aborted_data_batches(log) == []


def test_fetchs_aborted_list_follows_the_cleaner_without_index_files(tmp_path: Path) -> None:
    """A partition without .txnindex files (a mirror's): after a round the entries whose
    marker the cleaner dropped leave the broker's list, found by looking at the markers,
    not by walking the log again."""
    clock = FakeClock(1_000_000)
    settings = {"delete.retention.ms": str(RETENTION_MS), "segment.bytes": "65536"}
    storage, log = open_compacted(tmp_path / "d", clock, **settings)
    with storage:
        w = Writer(log, clock)
        workload(w, random.Random(5), 400)
        w.marker(9, commit=True)
        for n in range(0, 6000, 5):  # live keys: the log stays large after cleaning
            w.data(-1, list(range(1000 + n, 1005 + n)), "tail" + "." * 200)
        w.data(7, [1], "late")
        w.marker(7, commit=False)  # in the active segment: never cleaned, its entry stays
        for path in log.directory.glob("*.txnindex"):
            path.unlink()
        log.follower = True  # as a mirror's: no files written, the whole list held in memory
        w.indexes = TxnIndexes()  # its state loaded as a follower's
        txns = w.indexes.get(log)
        assert txns.aborted and txns.files_to == 0
        for _round in range(3):
            clean_partition(log, first_dirty=0, now_ms=clock.now_ms(), budget_bytes=1 << 20)
            clock.advance(RETENTION_MS + 1)
        left = set(markers(log))
        assert any(a.last_offset not in left for a in txns.aborted)  # stale until told
        before = rchar()
        w.indexes.after_cleaning(log, txns)
        assert rchar() - before < log.size_bytes / 8, (rchar() - before, log.size_bytes)
        assert txns.aborted and all(a.last_offset in left for a in txns.aborted)
        assert txns.aborted == [a for a in load(log, repair=False).aborted if a.last_offset in left]


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")
