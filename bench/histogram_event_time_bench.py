"""Topic histogram CPU cost with timestamps in order and out of order, unindexed and indexed.

Workload: N records (``BENCH_HISTOGRAM_RECORDS``, default 1 M; ``BENCH_QUICK=1``: 200 k)
over 4 partitions, ~100-byte values, batches of 200 records (a third zstd), 64 MiB
segments. Two timelines over the same ~3 days:

* ``ordered``: timestamps rising by 0–520 ms, one producer clock;
* ``event_time``: each record stamped at a random time within the hour of its place in
  the ordered timeline (producers with their own clocks, replays): out of order within
  every batch.

Each is measured unindexed (no ``.skip`` blocks yet: the unindexed tail's bounds only)
and after the indexer has caught up (blocks of 65 536 records, the default), with the
console's buckets (``auto``, at most 240) and 5-minute buckets over one day. Figures are
CPU seconds of this process (``time.process_time``): the first histogram of a freshly
opened storage (``first_cpu_s``, which pays for reading the tails' bounds once) and the
median of the following runs (``p50_cpu_s``). Every answer is checked against a brute
force count of every record's timestamp; ``exact`` says whether it matched.

``BENCH_HISTOGRAM_NAME`` names the results file and ``BENCH_HISTOGRAM_LABEL`` labels the
implementation measured: ``results/histogram_event_time_before.json`` is this script run
with ``query/histogram.py`` as it was when buckets were differences of ListOffsets
answers (the fields it lacks are null), ``results/histogram_event_time_after.json`` with
the counting by timestamps.
"""

from __future__ import annotations

import bisect
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import pick, save
from logtrove.query import histogram, pick_bucket, topic_span
from logtrove.records import Compression, NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.derived.indexer import Indexer

PARTITIONS = 4
BATCH = 200
T0 = 1_767_225_600_000
HOUR = 3_600_000
RUNS = 7


def records_wanted() -> int:
    override = os.environ.get("BENCH_HISTOGRAM_RECORDS")
    return int(override) if override else pick(1_000_000, 200_000)


def write(path: Path, n: int, event_time: bool) -> list[int]:
    """Write the topic; returns every record's timestamp."""
    rng = random.Random(7)
    values = [bytes(rng.choice(b"abcdefghij ") for _ in range(100)) for _ in range(64)]
    stamps: list[int] = []
    with Storage.open(path) as storage:
        storage.create_topic("t", PARTITIONS, {"segment.bytes": str(64 << 20), "retention.ms": "-1"})
        per = n // PARTITIONS
        for p in range(PARTITIONS):
            log = storage.log("t", p)
            ts = T0
            for start in range(0, per, BATCH):
                records = []
                for _ in range(min(BATCH, per - start)):
                    ts += rng.randint(0, 520)
                    stamp = ts - ts % HOUR + rng.randrange(HOUR) if event_time else ts
                    stamps.append(stamp)
                    records.append(NewRecord(values[rng.randrange(64)], None, (), stamp))
                codec = Compression.ZSTD if (start // BATCH) % 3 == 0 else Compression.NONE
                log.append(build_batch(records, compression=codec))
    return stamps


def brute(stamps: list[int], edges: tuple[int, ...]) -> list[int]:
    counts = [0] * (len(edges) - 1)
    first, last = edges[0], edges[-1]
    for ts in stamps:
        if first <= ts < last:
            counts[bisect.bisect_right(edges, ts) - 1] += 1
    return counts


def measure(path: Path, stamps: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    storage = Storage.open(path, read_only=True)
    try:
        logs = [storage.log("t", p) for p in range(PARTITIONS)]
        span = topic_span(logs)
        assert span is not None
        middle = (span[0] + span[1]) // 2
        plans = {
            "auto": pick_bucket(*span, "auto", 240),
            "5_minutes_one_day": pick_bucket(middle - 43_200_000, middle + 43_200_000, "5 minutes", 2000),
        }
        for name, plan in plans.items():
            samples = []
            found = None
            for _ in range(RUNS):
                began = time.process_time()
                found = histogram(logs, plan.edges)
                samples.append(time.process_time() - began)
            assert found is not None
            out[name] = {
                "buckets": len(plan.edges) - 1,
                "bucket": plan.unit,
                "first_cpu_s": round(samples[0], 4),
                "p50_cpu_s": round(statistics.median(samples[1:]), 4),
                "batches_scanned": found.batches_scanned,
                "batches_counted": getattr(found, "batches_counted", None),
                "blocks_counted": getattr(found, "blocks_counted", None),
                "exact": list(found.counts) == brute(stamps, plan.edges),
            }
    finally:
        storage.close()
    return out


def main() -> None:
    n = records_wanted()
    results: dict[str, Any] = {"records": n, "partitions": PARTITIONS, "batch_records": BATCH}
    results["implementation"] = os.environ.get("BENCH_HISTOGRAM_LABEL", "current")
    for timeline in ("ordered", "event_time"):
        tmp = Path(tempfile.mkdtemp(prefix="histogram-event-bench-"))
        try:
            stamps = write(tmp / "data", n, timeline == "event_time")
            results[f"{timeline}_unindexed"] = measure(tmp / "data", stamps)
            with Storage.open(tmp / "data") as storage:
                Indexer(storage).catch_up()
            results[f"{timeline}_indexed"] = measure(tmp / "data", stamps)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    save(os.environ.get("BENCH_HISTOGRAM_NAME", "histogram_event_time"), results)


if __name__ == "__main__":
    main()
