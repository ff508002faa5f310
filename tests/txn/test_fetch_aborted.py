"""The aborted transactions a read_committed Fetch returns (TxnIndexes.aborted_between):
read per Fetch from the sealed segments' ``.txnindex`` files with Kafka's early stop at
the LSO, the active segment's from memory. Checked against a brute force over the log
and its markers: a consumer that drops batches with the returned list (as Kafka's does)
sees exactly the committed data of the range, before and after a cleaning round."""

from __future__ import annotations

import random
from pathlib import Path

from tests.cleaner.helpers import open_compacted
from tests.cleaner.txn_workload import RETENTION_MS
from tests.cleaner.txn_workload import Writer as KeyedWriter
from tests.cleaner.txn_workload import workload as keyed_workload
from tests.txn.txn_log import Writer, check_ranges, workload

from logtrove.storage import Storage
from logtrove.storage.cleaner import clean_partition
from logtrove.storage.txnindex import AbortedTxn, read_txn_index, txn_index_path
from logtrove.testing import FakeClock
from logtrove.txn import MarkerType, TxnIndexes, marker_batch
from logtrove.txn.partition import load, scan

TOPIC = "t"


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
