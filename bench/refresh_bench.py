"""Cost of a read-only view's refresh while a writer appends (issue 20): the query
engine refreshes its view before each query, and under a producer's load the files have
always grown since the last one.

A writer fills a 4-partition topic (an active segment of ``--segment-mib`` MiB per
partition, default index interval, so each segment carries a few thousand index
entries), then, per round, appends N batches of 10 records to every partition and
flushes; two read-only views then refresh, in alternating order:

* ``extend``: the view as shipped, which extends the grown active segment in place;
* ``reopen``: the same view with in-place extension refused, so each refresh reopens
  every partition's active segment (what every refresh did before; both indexes read
  whole).

Figures are µs per ``Storage.refresh()`` of the whole view (4 partitions), side by side
in one run: the machine is shared, so absolute numbers are noisy; compare the columns.

    PYTHONPATH=src python bench/refresh_bench.py            # BENCH_QUICK=1 for a smoke run
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from _common import pick, save, summary_us
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage

TOPIC = "refresh"
PARTITIONS = 4


def refuse_extension(view: Storage) -> None:
    """Make the next refresh of ``view`` reopen each active segment (the old path)."""
    for p in range(PARTITIONS):
        for seg in view.log(TOPIC, p).segments[-1:]:
            setattr(seg, "extend_read_only", lambda: False)  # noqa: B010 (an instance override)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segment-mib", type=int, default=pick(64, 4))
    parser.add_argument("--rounds", type=int, default=pick(60, 10))
    args = parser.parse_args()
    rng = random.Random(20)
    batches = [
        build_batch(
            [
                NewRecord(rng.randbytes(100), b"k%d" % rng.randint(0, 999), (), 1_700_000_000_000 + i)
                for _ in range(10)
            ]
        )
        for i in range(256)
    ]
    root = Path(tempfile.mkdtemp(prefix="refresh-bench-"))
    try:
        writer = Storage.open(root)
        writer.create_topic(TOPIC, PARTITIONS, {"segment.bytes": str(1 << 30)})
        logs = [writer.log(TOPIC, p) for p in range(PARTITIONS)]
        fill = args.segment_mib << 20
        for log in logs:
            while log.active.size < fill:
                log.append(batches[rng.randrange(len(batches))])
            log.flush()
        views = {"extend": Storage.open(root, read_only=True), "reopen": Storage.open(root, read_only=True)}
        active = [views["extend"].log(TOPIC, p).segments[-1] for p in range(PARTITIONS)]
        results: dict[str, object] = {}
        for appends in (1, 10, 100):
            samples: dict[str, list[float]] = {name: [] for name in views}
            for round_ in range(args.rounds):
                for log in logs:
                    for _ in range(appends):
                        log.append(batches[rng.randrange(len(batches))])
                    log.flush()
                order = list(views) if round_ % 2 == 0 else list(reversed(views))
                for name in order:
                    view = views[name]
                    if name == "reopen":
                        refuse_extension(view)
                    start = time.perf_counter()
                    view.refresh()
                    samples[name].append(time.perf_counter() - start)
                assert all(  # the extending view measured the extension, not a reopen
                    views["extend"].log(TOPIC, p).segments[-1] is active[p] for p in range(PARTITIONS)
                )
                ends = {
                    n: [v.log(TOPIC, p).log_end_offset for p in range(PARTITIONS)] for n, v in views.items()
                }
                assert ends["extend"] == ends["reopen"] == [log.log_end_offset for log in logs]
            results[f"appends_{appends}"] = {name: summary_us(s) for name, s in samples.items()}
            print(appends, results[f"appends_{appends}"])
        for view in views.values():
            view.close()
        writer.close()
        save(
            "refresh",
            {
                "what": "µs per read-only Storage.refresh() of 4 partitions after N appends per partition",
                "segment_mib": args.segment_mib,
                "rounds": args.rounds,
                "records_per_batch": 10,
                "note": "side by side in one run, alternating order, on a shared loaded 2-core machine",
                **results,
            },
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
