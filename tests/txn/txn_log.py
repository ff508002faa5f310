"""A transactional log written by hand (a writer and two workloads) and what a
read_committed reader should see of it by brute force, shared by the transaction-file,
Fetch and follower tests."""

from __future__ import annotations

import random
from pathlib import Path

from logtrove.records import NewRecord, build_batch, marker_type
from logtrove.storage import PartitionLog
from logtrove.storage.txnindex import (
    AbortedTxn,
)
from logtrove.txn import MarkerType, TxnIndexes, marker_batch
from logtrove.txn.partition import scan


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


class Writer:
    """Appends as the broker does: transactional batches through the produce path's
    bookkeeping, markers through the coordinator's."""

    def __init__(self, log: PartitionLog, indexes: TxnIndexes) -> None:
        self.log, self.indexes = log, indexes

    def data(self, pid: int, n: int = 3, value: bytes = b"x" * 100) -> range:
        txns = self.indexes.get(self.log) if pid >= 0 else None
        records = [NewRecord(value=value, key=b"k%d" % i) for i in range(n)]
        batch = build_batch(records, producer_id=pid, producer_epoch=0, transactional=pid >= 0)
        appended = self.log.append(batch)
        if txns is not None:
            txns.on_transactional_batch(pid, appended.base_offset)
        return range(appended.base_offset, appended.last_offset + 1)

    def marker(self, pid: int, *, commit: bool) -> int:
        self.indexes.get(self.log)
        offset = self.log.append(marker_batch(pid, 0, commit, coordinator_epoch=0, now_ms=1_000)).base_offset
        self.indexes.on_marker(self.log, pid, MarkerType.COMMIT if commit else MarkerType.ABORT, offset)
        return offset


def workload(w: Writer, rng: random.Random, rounds: int) -> None:
    """Interleaved transactions of a few producers, half aborted, with plain data; some
    transactions span segment rolls; two left open at the end."""
    open_: set[int] = set()
    for _ in range(rounds):
        pid = rng.randrange(1, 6)
        choice = rng.random()
        if pid in open_ and choice < 0.3:
            w.marker(pid, commit=rng.random() < 0.5)
            open_.discard(pid)
        elif choice < 0.8:
            w.data(pid, rng.randrange(1, 4))
            open_.add(pid)
        else:
            w.data(-1, 2)
    for pid in sorted(open_)[2:]:
        w.marker(pid, commit=False)


def data_offsets(log: PartitionLog) -> list[int]:
    return [o for h, _ in log.batches(0) if not h.is_control for o in range(h.base_offset, h.next_offset)]


def brute_force_visible(log: PartitionLog) -> list[int]:
    """Data offsets a read_committed consumer sees, from every batch and the markers."""
    pending: dict[int, list[int]] = {}
    decided: list[int] = []
    first_open: list[int] = []
    for header, data in log.batches(0):
        offsets = list(range(header.base_offset, header.next_offset))
        if header.is_control:
            kind = marker_type(data, header)
            if kind is not None:
                batch = pending.pop(header.producer_id, [])
                if kind == 1:
                    decided.extend(batch)
        elif header.is_transactional:
            pending.setdefault(header.producer_id, []).extend(offsets)
        else:
            decided.extend(offsets)
    first_open = [offsets[0] for offsets in pending.values() if offsets]
    lso = min(first_open, default=log.log_end_offset)
    return sorted(o for o in decided if o < lso)


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
            if marker_type(data, header) == 0:
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
        h.base_offset: h.producer_id for h, d in log.batches(0) if h.is_control and marker_type(d, h) == 0
    }
    visible = brute_force_visible(log)
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
