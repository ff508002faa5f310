"""The aborted transactions of a read_committed Fetch: held in memory vs read from the
``.txnindex`` files per Fetch; and the start of a standby's reader with and without the
follower's transaction files.

Workload: one partition of short transactions (2 producers interleaved, 3 batches each,
one in three aborted, plain batches between), 1 MB segments, written through
:class:`~logtrove.txn.TxnIndexes` as the broker does; then copied batch by batch into a
followed topic with the mirror's follower append (:func:`logtrove.mirror.follower.append_fetched`).

Measured (the machine is shared: cases alternate within a run, medians of 3 rounds):

* ``memory_bytes``: traced memory of the aborted list a broker holds after a load — every
  entry (:func:`logtrove.txn.partition.scan`, what it held before) vs the active
  segment's (:meth:`TxnIndexes.get`), and the bytes per entry;
* ``fetch_us``: the aborted list of one Fetch range of 1,500 offsets below the LSO, per
  call: the in-memory list (before) vs :meth:`TxnIndexes.aborted_between`, for a consumer
  catching up (consecutive ranges from the start, files not yet parsed) and for random
  ranges (the parsed-file cache warm and cold by turns);
* ``standby_load``: :func:`logtrove.txn.partition.load` of the standby opened read-only, with
  the files its rolls wrote and with its ``.txnindex`` files removed (what a standby had
  before: a walk of every header); seconds and bytes read (``rchar``).
"""

from __future__ import annotations

import functools
import random
import shutil
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from _common import pick, save
from logtrove.mirror.follower import append_fetched
from logtrove.records import NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.txn import MarkerType, TxnIndexes, marker_batch
from logtrove.txn.partition import load, scan

SETTINGS = {"segment.bytes": str(1 << 20)}


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def write(log: PartitionLog, indexes: TxnIndexes, rounds: int) -> None:
    rng = random.Random(1)
    records = [NewRecord(value=b"x" * 100, key=b"k%d" % i) for i in range(3)]
    txns = indexes.get(log)

    def data(pid: int) -> None:
        batch = build_batch(records, producer_id=pid, producer_epoch=0, transactional=pid >= 0)
        offset = log.append(batch).base_offset
        if pid >= 0:
            txns.on_transactional_batch(pid, offset)

    def marker(pid: int, commit: bool) -> None:
        offset = log.append(marker_batch(pid, 0, commit, coordinator_epoch=0, now_ms=1)).base_offset
        indexes.on_marker(log, pid, MarkerType.COMMIT if commit else MarkerType.ABORT, offset)

    for _ in range(rounds):
        a, b = rng.sample(range(1, 9), 2)
        data(a)
        data(b)
        data(a)
        marker(a, rng.random() < 0.67)
        marker(b, True)
        for _plain in range(rng.randrange(5, 30)):
            data(-1)


def copy(source: PartitionLog, dest: PartitionLog) -> None:
    chunk: list[bytes] = []
    for _header, data in source.batches(0):
        chunk.append(bytes(data))
        if len(chunk) == 20:
            append_fetched(dest, b"".join(chunk))
            chunk = []
    if chunk:
        append_fetched(dest, b"".join(chunk))


def traced(fn: Any) -> tuple[Any, int]:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    result = fn()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return result, after - before


def per_call_us(calls: list[Any]) -> float:
    t0 = time.perf_counter()
    for call in calls:
        call()
    return (time.perf_counter() - t0) / len(calls) * 1e6


def main() -> None:
    rounds = pick(60_000, 10_000)
    root = Path(tempfile.mkdtemp(prefix="txnfetch-"))
    try:
        with Storage.open(root / "src") as src, Storage.open(root / "dst") as dst:
            src.create_topic("t", 1, SETTINGS)
            log = src.log("t", 0)
            write(log, TxnIndexes(), rounds)
            dst.create_topic("t", 1, SETTINGS, followed_from="source")
            copy(log, dst.log("t", 0))
            whole, whole_bytes = traced(lambda: scan(log))
            fresh = TxnIndexes()
            held, held_bytes = traced(lambda: fresh.get(log))
            shape = {"bytes": log.size_bytes, "segments": len(log.segments), "aborted": len(whole.aborted)}
            lso = held.last_stable_offset(log.log_end_offset)
            rng = random.Random(2)
            sequential = [(s, min(s + 1500, lso)) for s in range(0, lso - 1500, 1500)]
            random_ranges = [
                (s, min(s + 1500, lso)) for s in (rng.randrange(lso - 1500) for _ in range(3000))
            ]
            fetch: dict[str, list[float]] = {
                k: [] for k in ("memory_seq", "files_seq", "memory_rand", "files_rand")
            }
            for _round in range(3):
                fetch["memory_seq"].append(
                    per_call_us([lambda r=r: whole.aborted_between(*r) for r in sequential])
                )
                cold = TxnIndexes()
                state = cold.get(log)
                fetch["files_seq"].append(
                    per_call_us([functools.partial(cold.aborted_between, log, state, *r) for r in sequential])
                )
                fetch["memory_rand"].append(
                    per_call_us([lambda r=r: whole.aborted_between(*r) for r in random_ranges])
                )
                fetch["files_rand"].append(
                    per_call_us([lambda r=r: fresh.aborted_between(log, held, *r) for r in random_ranges])
                )
            for start, end in random_ranges[:200]:
                expected = [a for a in whole.aborted if a.last_offset >= start and a.first_offset < end]
                assert fresh.aborted_between(log, held, start, end) == expected
        directory = root / "dst" / "t-0"
        standby: dict[str, list[tuple[float, int]]] = {"files": [], "no_files": []}
        for _round in range(3):
            for case in ("files", "no_files"):
                saved = {}
                if case == "no_files":
                    saved = {p: p.read_bytes() for p in directory.glob("*.txnindex")}
                    for path in saved:
                        path.unlink()
                with Storage.open(root / "dst", read_only=True) as reader:
                    rlog = reader.log("t", 0)
                    before, t0 = rchar(), time.perf_counter()
                    loaded = load(rlog, repair=False)
                    standby[case].append((time.perf_counter() - t0, rchar() - before))
                    assert loaded.aborted == whole.aborted
                for path, data in saved.items():
                    path.write_bytes(data)
        results = {
            "rounds": rounds,
            **shape,
            "memory_bytes": {
                "every_entry": whole_bytes,
                "active_segment_only": held_bytes,
                "entries_held": len(held.aborted),
                "bytes_per_entry": round(whole_bytes / max(len(whole.aborted), 1), 1),
            },
            "fetch_us_median": {name: round(statistics.median(v), 2) for name, v in fetch.items()},
            "fetches": {"sequential": len(sequential), "random": len(random_ranges)},
            "standby_load": {
                case: {
                    "seconds_median": statistics.median(s for s, _ in runs),
                    "bytes_read_median": statistics.median(b for _, b in runs),
                }
                for case, runs in standby.items()
            },
        }
        print(results)
        save("txn-fetch", results)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
