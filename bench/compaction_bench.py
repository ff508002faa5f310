"""Compaction benchmark: MB/s cleaned and peak memory against the offset-map budget.

Workload: N records over K keys (100-byte values, uniformly random keys, 500 records a
batch, uncompressed) in 64 MiB segments of a compacted topic; then ``Cleaner.clean_until_caught_up`` with several map
budgets, each in a fresh process (so peak RSS is that run's). Full: 10 M records over
1 M keys; ``BENCH_QUICK=1``: 200 k over 20 k.

MB/s is the log size before cleaning divided by the wall time of all rounds (a budget
smaller than the key count needs several rounds, each rereading the clean section).
Each run notes the 1-minute load average before and after it and which implementation
of the cleaner's passes ran (``compiled`` or ``python``): the machine may be shared.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import QUICK, pick, save
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.cleaner import Cleaner, passes


def build(data: Path, records: int, keys: int) -> int:
    storage = Storage.open(data)
    storage.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": str(64 * 1024 * 1024)})
    log = storage.log("c", 0)
    rng = random.Random(1)
    value = rng.randbytes(100)
    per_batch = 500
    for start in range(0, records, per_batch):
        batch = [
            NewRecord(value, b"key-%08d" % rng.randrange(keys), (), 1_700_000_000_000 + start)
            for _ in range(per_batch)
        ]
        log.append(build_batch(batch))
    log.roll()
    size = log.size_bytes
    storage.close()
    return size


def run_one(data: Path, budget: int) -> dict[str, float | str]:
    load_before = os.getloadavg()[0]
    storage = Storage.open(data)
    log = storage.log("c", 0)
    before = log.size_bytes
    start = time.perf_counter()
    rounds = Cleaner(storage, map_budget_bytes=budget).clean_until_caught_up(log)
    elapsed = time.perf_counter() - start
    after = log.size_bytes
    storage.close()
    return {
        "map_budget_MiB": round(budget / 2**20, 2),
        "rounds": len(rounds),
        "seconds": round(elapsed, 2),
        "bytes_before": before,
        "bytes_after": after,
        "MB_per_s": round(before / elapsed / 1e6, 2),
        "records_per_s": round(sum(r.records_read for r in rounds) / elapsed),
        "peak_rss_MiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_1m_before": round(load_before, 2),
        "load_1m_after": round(os.getloadavg()[0], 2),
        "passes": passes.IMPLEMENTATION,
    }


def main() -> None:
    if len(sys.argv) == 3:  # child: one budget on a copy of the data
        print(json.dumps(run_one(Path(sys.argv[1]), int(sys.argv[2]))))
        return
    records, keys = pick(10_000_000, 200_000), pick(1_000_000, 20_000)
    base = Path(
        tempfile.mkdtemp(prefix="logtrove-compact-bench-", dir=os.environ.get("BENCH_DIR") or Path.cwd())
    )
    try:
        source = base / "source"
        t = time.perf_counter()
        size = build(source, records, keys)
        print(
            f"built {records:,} records over {keys:,} keys, {size / 1e6:.0f} MB in {time.perf_counter() - t:.0f} s"
        )
        entry = 24
        fractions = (0.25, 1.0, 2.0) if QUICK else (1.0, 2.0)  # 0.25x at 10 M records takes hours
        budgets = [int(keys * entry / 0.9 * f) + 4096 for f in fractions]
        runs = []
        for budget in budgets:
            copy = base / f"run-{budget}"
            shutil.copytree(source, copy)
            out = subprocess.run(
                [sys.executable, __file__, str(copy), str(budget)], capture_output=True, text=True, check=True
            )
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(runs[-1])
            shutil.rmtree(copy)
        plots = [
            {
                "title": "Compaction throughput by offset-map budget (MB/s of log cleaned)",
                "ylabel": "MB/s",
                "bars": {
                    f"{r['map_budget_MiB']} MiB map, {r['rounds']} round(s)": r["MB_per_s"] for r in runs
                },
            }
        ]
        save(
            "compaction", {"records": records, "keys": keys, "log_bytes": size, "runs": runs, "plots": plots}
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
