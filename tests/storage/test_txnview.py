"""The read_committed view a reader derives from a log's markers (storage/txnview.py):
aborted transactions by producer, the last stable offset, and a walk that continues
where it stopped but starts again when the log under it shrank."""

from __future__ import annotations

from pathlib import Path

from logtrove.records import NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.storage.txnview import committed_view
from logtrove.txn import marker_batch


def append(log: PartitionLog, n: int, producer_id: int = -1) -> range:
    start = log.log_end_offset
    records = [NewRecord(key=None, value=b"v%d" % i, timestamp=1_000 + i) for i in range(n)]
    log.append(
        build_batch(records, producer_id=producer_id, producer_epoch=0, transactional=producer_id >= 0)
    )
    return range(start, log.log_end_offset)


def marker(log: PartitionLog, producer_id: int, *, commit: bool) -> int:
    offset = log.log_end_offset
    log.append(marker_batch(producer_id, 0, commit, coordinator_epoch=0, now_ms=2_000))
    return offset


def visible(log: PartitionLog) -> list[int]:
    """The data records' offsets the view shows (markers are control batches, which every
    reader skips by the batch header)."""
    view = committed_view(log)
    return [
        r.offset
        for h, _ in log.batches(0)
        if not h.is_control
        for r in log.records(h.base_offset, h.next_offset)
        if view.visible(r.offset)
    ]


def test_aborted_by_producer_open_holds_back_and_truncation_rewalks(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic("t", 1, {"segment.bytes": "1024"})
        log = storage.log("t", 0)
        a1 = append(log, 3, producer_id=1)
        plain = append(log, 2)
        b1 = append(log, 3, producer_id=2)
        a2 = append(log, 2, producer_id=1)
        abort_a = marker(log, 1, commit=False)
        commit_b = marker(log, 2, commit=True)
        for _ in range(12):  # several segments of plain data
            append(log, 4)
        tail = range(commit_b + 1, log.log_end_offset)
        assert len(log.segments) > 1
        shown = [*plain, *b1, *tail]
        assert visible(log) == shown
        assert committed_view(log).last_stable_offset == log.log_end_offset
        assert all(committed_view(log).aborted(o) for o in (*a1, *a2))
        assert not committed_view(log).aborted(abort_a)  # the marker: a control batch, hidden by its header

        c = append(log, 2, producer_id=3)  # open: the LSO stops at it, later data waits
        after = append(log, 2)
        assert committed_view(log).last_stable_offset == c.start
        assert visible(log) == shown
        marker(log, 3, commit=True)
        assert visible(log) == [*shown, *c, *after]

        log.active.truncate_to_offset(c.start)  # the walked segment shrank: walked again
        assert visible(log) == shown
        assert committed_view(log).last_stable_offset == c.start
