"""The aborted transactions a read_committed Fetch returns (TxnIndexes.aborted_between):
read per Fetch from the sealed segments' ``.txnindex`` files with Kafka's early stop at
the LSO, the active segment's from memory. Checked against a brute force over the log
and its markers: a consumer that drops batches with the returned list (as Kafka's does)
sees exactly the committed data of the range, before and after a cleaning round."""

from __future__ import annotations

import random
from pathlib import Path

from tests.cleaner.conftest import open_compacted
from tests.cleaner.test_txn_cleaning import RETENTION_MS
from tests.cleaner.test_txn_cleaning import Writer as KeyedWriter
from tests.cleaner.test_txn_cleaning import workload as keyed_workload
from tests.txn.test_txn_files import Writer, _brute_force_visible, workload

from logtrove.storage import PartitionLog, Storage
from logtrove.storage.cleaner import clean_partition
from logtrove.storage.txnindex import AbortedTxn, read_txn_index, txn_index_path
from logtrove.storage.txnview import marker_kind
from logtrove.testing import FakeClock
from logtrove.txn import MarkerType, TxnIndexes, marker_batch
from logtrove.txn.partition import load, scan

TOPIC = "t"


def consumed(log: PartitionLog, aborted: list[AbortedTxn], start: int, end: int) -> list[int]:
    """The data offsets a read_committed consumer keeps from the batches beginning in
    ``[start, end)`` given the Fetch's aborted list (Kafka's consumer: a producer is
    skipped from its entry's first offset until its ABORT marker)."""
    pending = sorted(aborted, key=lambda a: a.first_offset)
    skipping: set[int] = set()
    kept: list[int] = []
    for header, data in log.batches(start):
        if header.base_offset >= end:
            break
        if header.base_offset < start:
            continue
        while pending and pending[0].first_offset <= header.last_offset:
            skipping.add(pending.pop(0).producer_id)
        if header.is_control:
            if marker_kind(data, header) == 0:
                skipping.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in skipping):
            kept.extend(range(header.base_offset, min(header.next_offset, end)))
    return kept


def batch_bases(log: PartitionLog) -> list[int]:
    return [h.base_offset for h, _ in log.batches(0)]


def check_ranges(
    log: PartitionLog, indexes: TxnIndexes, rng: random.Random, count: int, *, cleaned: bool = False
) -> None:
    """Random Fetch ranges below the LSO: a consumer using the list sees the brute force's
    committed data, and the list is the walk's (after cleaning, whose rounds drop aborted
    data before the marker, each entry's ABORT marker is still in the log)."""
    txns = indexes.get(log)
    indexes.after_cleaning(log, txns)
    lso = txns.last_stable_offset(log.log_end_offset)
    every = scan(log).aborted  # a walk of every header: what the files must add up to
    aborts = {
        h.base_offset: h.producer_id for h, d in log.batches(0) if h.is_control and marker_kind(d, h) == 0
    }
    visible = _brute_force_visible(log)
    bases = [b for b in batch_bases(log) if b < lso]
    for _ in range(count):
        start = rng.choice(bases)
        end = min(start + rng.randrange(1, 400), lso)
        got = indexes.aborted_between(log, txns, start, end)
        if cleaned:
            assert all(aborts.get(a.last_offset) == a.producer_id for a in got), (start, end)
        else:
            assert got == [a for a in every if a.last_offset >= start and a.first_offset < end], (start, end)
        assert consumed(log, got, start, end) == [o for o in visible if start <= o < end], (start, end)


def test_fetch_reads_the_sealed_segments_files_and_holds_only_the_active_segments(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic(TOPIC, 1, {"segment.bytes": "20000"})
        log = storage.log(TOPIC, 0)
        indexes = TxnIndexes()
        workload(Writer(log, indexes), random.Random(3), 1_500)
        assert len(log.segments) > 10
        check_ranges(log, indexes, random.Random(4), 400)
        txns = indexes.get(log)
        assert txns.files_to == log.active.base_offset
        assert all(a.last_offset >= log.active.base_offset for a in txns.aborted)
        assert len(txns.aborted) < len(scan(log).aborted) / 5  # the rest are in the files
        # a restart: the same answers from the files, the load keeps only the active part
        fresh = TxnIndexes()
        check_ranges(log, fresh, random.Random(5), 200)
        assert fresh.get(log).files_to == log.active.base_offset


def test_an_abort_recorded_after_its_segment_rolled_reaches_that_segments_index(tmp_path: Path) -> None:
    """The marker is appended, the segment rolls, then the coordinator records the abort:
    the sealed segment's .txnindex must get the entry (a restart trusts that file)."""
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic(TOPIC, 1)
        log = storage.log(TOPIC, 0)
        indexes = TxnIndexes()
        w = Writer(log, indexes)
        w.data(1)
        offset = log.append(marker_batch(1, 0, False, coordinator_epoch=0, now_ms=1_000)).base_offset
        sealed = log.active
        log.roll()
        indexes.on_marker(log, 1, MarkerType.ABORT, offset)
        assert read_txn_index(sealed) == [AbortedTxn(1, 0, offset)]
    with Storage.open(data) as storage:  # a clean restart trusts the file
        log = storage.log(TOPIC, 0)
        assert load(log).aborted == [AbortedTxn(1, 0, offset)]


def test_a_missing_index_is_rebuilt_from_the_log_by_the_fetch(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic(TOPIC, 1, {"segment.bytes": "20000"})
        log = storage.log(TOPIC, 0)
        indexes = TxnIndexes()
        workload(Writer(log, indexes), random.Random(6), 800)
        indexes.get(log)
        victim = next(s for s in log.segments[2:-1] if read_txn_index(s))
        txn_index_path(victim).unlink()
        check_ranges(log, indexes, random.Random(7), 100)
        assert read_txn_index(victim) == [
            a for a in scan(log).aborted if victim.base_offset <= a.last_offset < victim.next_offset
        ]


def test_a_cleaning_round_between_fetches(tmp_path: Path) -> None:
    """Parsed files are kept between Fetches: a round that rewrites segments (aborted data
    and markers dropped, new .txnindex files) must be what the next Fetch reads."""
    clock = FakeClock(1_000_000)
    settings = {"delete.retention.ms": str(RETENTION_MS), "segment.bytes": "4096"}
    storage, log = open_compacted(tmp_path / "d", clock, **settings)
    with storage:
        w = KeyedWriter(log, clock)
        keyed_workload(w, random.Random(8), 500)
        rng = random.Random(9)
        check_ranges(log, w.indexes, rng, 200)  # the files parsed and cached
        before = len(scan(log).aborted)
        for _round in range(3):
            clean_partition(log, first_dirty=0, now_ms=clock.now_ms(), budget_bytes=1 << 20)
            clock.advance(RETENTION_MS + 1)
            check_ranges(log, w.indexes, rng, 200, cleaned=True)
        assert len(scan(log).aborted) < before  # the rounds dropped markers: the lists changed
