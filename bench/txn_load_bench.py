"""Transaction state at a start: the per-segment files vs a walk of every batch header.

Workload: one partition of N transactions (4 producers interleaved, batches of 10 × 100 B
records, one transaction in three aborted, plain batches between), written through
:class:`~logtrove.txn.TxnIndexes` as the broker does, 64 MiB segments; then closed.

Measured, alternating in one run (the machine is shared: compare within a run):

* ``walk``: what the broker did before the ``.txnindex`` files
  (:func:`logtrove.txn.partition.scan` from the log start);
* ``files``: :func:`logtrove.txn.partition.load` after a start (``.txnindex`` of each sealed
  segment, the newest snapshot, a walk of the active segment);
* ``files_end``: the same after a clean stop's snapshot at the log end (nothing walked);
* ``reader``: a read-only reader's committed view (files + the aborted spans' headers).

Per case: seconds (median of 3) and bytes read (``rchar`` of /proc/self/io). The states
are compared with the walk's.
"""

from __future__ import annotations

import functools
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import pick, save
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.txnview import _Cache
from logtrove.txn import MarkerType, TxnIndexes, marker_batch
from logtrove.txn.partition import load, scan


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def write(path: Path, transactions: int) -> dict[str, int]:
    rng = random.Random(1)
    batch_records = [NewRecord(value=b"x" * 100, key=b"k%d" % i) for i in range(10)]
    indexes = TxnIndexes()
    with Storage.open(path) as storage:
        storage.create_topic("t", 1, {"segment.bytes": str(64 << 20)})
        log = storage.log("t", 0)
        txns = indexes.get(log)
        open_: dict[int, int] = {}
        done = 0
        while done < transactions:
            pid = rng.randrange(1, 5)
            if open_.get(pid, 0) >= 3:
                offset = log.append(
                    marker_batch(pid, 0, done % 3 != 0, coordinator_epoch=0, now_ms=1)
                ).base_offset
                kind = MarkerType.COMMIT if done % 3 else MarkerType.ABORT
                indexes.on_marker(log, pid, kind, offset)
                del open_[pid]
                done += 1
            else:
                batch = build_batch(batch_records, producer_id=pid, producer_epoch=0, transactional=True)
                txns.on_transactional_batch(pid, log.append(batch).base_offset)
                open_[pid] = open_.get(pid, 0) + 1
                if rng.random() < 0.3:
                    log.append(build_batch(batch_records))
        size, segments = log.size_bytes, len(log.segments)
    indexes.write_end_snapshots()
    return {"bytes": size, "segments": segments}


def measure(fn: Callable[[], Any]) -> tuple[float, int, Any]:
    before, t0 = rchar(), time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, rchar() - before, result


def main() -> None:
    transactions = pick(100_000, 20_000)
    root = Path(tempfile.mkdtemp(prefix="txnload-"))
    try:
        data = root / "data"
        shape = write(data, transactions)
        end_snapshots = sorted((data / "t-0").glob("*.snapshot"))[-1]
        saved = end_snapshots.read_bytes()
        cases: dict[str, list[tuple[float, int]]] = {"walk": [], "files": [], "files_end": [], "reader": []}
        for _ in range(3):
            with Storage.open(data) as storage:
                log = storage.log("t", 0)
                seconds, read, walked = measure(functools.partial(scan, log))
                cases["walk"].append((seconds, read))
                end_snapshots.write_bytes(saved)
                seconds, read, ended = measure(functools.partial(load, log, repair=False))
                cases["files_end"].append((seconds, read))
                end_snapshots.unlink()
                seconds, read, loaded = measure(functools.partial(load, log, repair=False))
                cases["files"].append((seconds, read))
                assert loaded.aborted == walked.aborted == ended.aborted and loaded.open == walked.open
            end_snapshots.write_bytes(saved)
            with Storage.open(data, read_only=True) as storage:
                log = storage.log("t", 0)
                seconds, read, _view = measure(functools.partial(_Cache().view, log))
                cases["reader"].append((seconds, read))
        results = {
            "transactions": transactions,
            "aborted": len(walked.aborted),
            **shape,
            **{
                name: {
                    "seconds_median": statistics.median(s for s, _ in runs),
                    "bytes_read_median": statistics.median(b for _, b in runs),
                }
                for name, runs in cases.items()
            },
        }
        print(results)
        save("txn-load", results)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
