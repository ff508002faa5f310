"""A keyed transactional workload on a compacted log, shared by the cleaner's and the
Fetch's transaction tests."""

from __future__ import annotations

import random

from logtrove.records import NewRecord, build_batch
from logtrove.storage import PartitionLog
from logtrove.testing import FakeClock
from logtrove.txn import MarkerType, TxnIndexes, marker_batch

RETENTION_MS = 10_000


class Writer:
    """Appends as the broker does (the transaction files kept by TxnIndexes)."""

    def __init__(self, log: PartitionLog, clock: FakeClock) -> None:
        self.log, self.clock, self.indexes = log, clock, TxnIndexes()

    def data(self, pid: int, keys: list[int], tag: str) -> None:
        txns = self.indexes.get(self.log) if pid >= 0 else None
        records = [
            NewRecord(key=b"k%d" % k, value=f"{tag}-{k}".encode(), timestamp=self.clock.now_ms())
            for k in keys
        ]
        appended = self.log.append(
            build_batch(records, producer_id=pid, producer_epoch=0, transactional=pid >= 0)
        )
        if txns is not None:
            txns.on_transactional_batch(pid, appended.base_offset)
        self.clock.advance(5)

    def marker(self, pid: int, *, commit: bool) -> None:
        self.indexes.get(self.log)
        batch = marker_batch(pid, 0, commit, coordinator_epoch=0, now_ms=self.clock.now_ms())
        offset = self.log.append(batch).base_offset
        kind = MarkerType.COMMIT if commit else MarkerType.ABORT
        self.indexes.on_marker(self.log, pid, kind, offset)


def workload(w: Writer, rng: random.Random, rounds: int) -> int:
    """Keyed transactions of four producers, a third aborted, with plain keyed data; one
    transaction left open. Returns its first offset."""
    open_: set[int] = set()
    for n in range(rounds):
        pid = rng.randrange(1, 5)
        if pid in open_ and rng.random() < 0.35:
            w.marker(pid, commit=rng.random() < 0.67)
            open_.discard(pid)
        elif rng.random() < 0.8:
            w.data(pid, rng.sample(range(40), 3), f"t{pid}.{n}")
            open_.add(pid)
        else:
            w.data(-1, rng.sample(range(40), 2), f"p{n}")
    for pid in sorted(open_):
        w.marker(pid, commit=True)
    first_open = w.log.log_end_offset
    w.data(9, [1, 2, 3], "open")
    for n in range(60):  # after the open transaction: uncleanable until it ends
        w.data(-1, rng.sample(range(40), 2), f"late{n}")
    return first_open
