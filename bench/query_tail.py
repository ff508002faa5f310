"""Where a query type's slow samples come from: per-sample wall time against the thread's
CPU time, involuntary context switches (preemption), page faults, GC passes (gc.callbacks)
overlapping the sample, and each slow sample re-run alone (a deterministic slow query is
as slow again; one that was preempted or paused is not).

Runs over a data set that ``bench/query_bench.py`` built and kept (``BENCH_QUERY_DATA``)::

    BENCH_QUERY_RECORDS=10000000 BENCH_QUERY_DATA=/tmp/q10m PYTHONPATH=src:bench \\
        python bench/query_tail.py [samples] [query type ...]

Prints one paragraph per query type, with the percentiles of the samples' thread CPU
time (the code's own cost, which preemption on a shared machine does not inflate);
nothing is saved (the figures go to BENCHMARKS.md
by hand with the conclusion).
"""

from __future__ import annotations

import gc
import json
import os
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

from logtrove.query import (
    HeaderQuery,
    IdQuery,
    KeyQuery,
    OffsetQuery,
    Query,
    QueryEngine,
    RangeQuery,
    TimeQuery,
)
from logtrove.storage import Storage
from query_bench import KEYS, PARTITIONS, T0, N

Sample = tuple[float, float, float, Query, tuple[float, int, int, int]]


def main() -> None:
    data = Path(os.environ["BENCH_QUERY_DATA"])
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    only = sys.argv[2:]
    ids = json.loads((data / "ids.json").read_text())
    engine = QueryEngine(Storage.open(data / "data", read_only=True))
    queries = {
        "offset": lambda r: OffsetQuery("q", r.randrange(PARTITIONS), r.randrange(N // PARTITIONS // 2)),
        "time": lambda r: TimeQuery("q", r.randrange(T0, T0 + N)),
        "range": lambda r: RangeQuery("q", (a := r.randrange(T0, T0 + N)), a + 1000, limit=100),
        "key": lambda r: KeyQuery("q", b"key-%d" % r.randrange(KEYS)),
        "client_id": lambda r: IdQuery("q", r.choice(ids)),
        "header": lambda r: HeaderQuery("q", "user", b"user-%d" % r.randrange(5000), limit=100),
    }
    passes: list[tuple[float, float, int]] = []
    started = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            passes.append((started[0], time.perf_counter(), info["generation"]))

    gc.callbacks.append(on_gc)
    for name, make in queries.items():
        if only and name not in only:
            continue
        rng = random.Random(3)
        for _ in range(50):
            engine.run(make(rng)).all()
        passes.clear()
        samples: list[Sample] = []
        for _ in range(runs):
            q = make(rng)
            r0, c0 = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
            t = time.perf_counter()
            engine.run(q).all()
            e = time.perf_counter()
            c1, r1 = time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD)
            usage = (
                round((c1 - c0) * 1e3, 2),
                r1.ru_nivcsw - r0.ru_nivcsw,
                r1.ru_minflt - r0.ru_minflt,
                r1.ru_majflt - r0.ru_majflt,
            )
            samples.append((e - t, t, e, q, usage))
        ordered = sorted(s[0] for s in samples)

        def pct(p: float, ordered: list[float] = ordered) -> float:
            return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] * 1e3

        slow = sorted(samples, key=lambda s: -s[0])[: max(1, runs // 100)]
        rerun = []
        for s in slow:
            t = time.perf_counter()
            engine.run(s[3]).all()
            rerun.append(round((time.perf_counter() - t) * 1e3, 2))
        during = [[(g, round((b - a) * 1e3, 2)) for a, b, g in passes if a < s[2] and b > s[1]] for s in slow]
        median = sorted(samples, key=lambda s: s[0])[len(samples) // 2]
        print(
            f"{name}: p50 {pct(50):.2f} p99 {pct(99):.2f} p999 {pct(99.9):.2f} max {ordered[-1] * 1e3:.2f} ms, "
            f"load {os.getloadavg()[0]:.2f}"
        )
        cpu = sorted(s[4][0] for s in samples)
        cpu_pct = [cpu[min(len(cpu) - 1, round(q / 100 * (len(cpu) - 1)))] for q in (50, 99, 99.9)]
        print("  thread CPU ms p50 / p99 / p999", cpu_pct)  # what the code costs, without preemption
        print("  slowest ms           ", [round(s[0] * 1e3, 2) for s in slow])
        print("  re-run alone ms      ", rerun)
        print("  (cpu ms, preempted, minflt, majflt)", [s[4] for s in slow])
        print("  median sample        ", round(median[0] * 1e3, 2), median[4])
        print("  GC passes during slow", during)
        print("  GC passes in all     ", {g: sum(1 for *_, x in passes if x == g) for g in (0, 1, 2)})


if __name__ == "__main__":
    main()
