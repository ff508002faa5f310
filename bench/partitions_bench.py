"""Partition scale benchmark: opening a data directory of N and 4N partitions, and
creating one large topic.

Measures, on a real data directory (in ``$BENCH_DIR`` or a temp dir):

* the time :meth:`Storage.open` (a writer, after a clean shutdown) takes for N and 4N
  partitions of one record each (best of 3) and the ratio: linear opening gives about
  4, the per-partition checkpoint re-read of before was quadratic (about 16);
* the descriptors the opening leaves open (``/proc/self/fd``);
* the time to create one topic of 5,000 partitions (the file work the broker does in a
  worker thread).

Full size: N = 2,000. ``BENCH_QUICK=1``: N = 1,000. Run: ``.venv/bin/python bench/partitions_bench.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import pick, save
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage

TOPIC_SIZE = 1000


_OPEN = """
import sys, time
from pathlib import Path
from logtrove.storage import Storage
def fds(): return sum(1 for _ in Path("/proc/self/fd").iterdir())
before = fds()
started = time.perf_counter()
storage = Storage.open(sys.argv[1])
print(time.perf_counter() - started, fds() - before)
storage.close()
"""


def build(path: Path, partitions: int) -> None:
    batch = build_batch([NewRecord(b"x" * 100)])
    with Storage.open(path) as storage:
        for t in range(partitions // TOPIC_SIZE):
            storage.create_topic(f"topic-{t}", TOPIC_SIZE)
            for p in range(TOPIC_SIZE):
                storage.log(f"topic-{t}", p).append(batch)


def time_open(path: Path) -> tuple[float, int]:
    """Best of 3 openings, each in a fresh process (as a broker restart is), and the
    descriptors one opening keeps."""
    best, kept = float("inf"), 0
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", _OPEN, str(path)], capture_output=True, text=True, check=True
        )
        seconds, fds = out.stdout.split()
        best, kept = min(best, float(seconds)), int(fds)
    return best, kept


def main() -> None:
    n = pick(2000, 1000)
    root = Path(tempfile.mkdtemp(prefix="partitions-bench-", dir=os.environ.get("BENCH_DIR")))
    try:
        results: dict[str, object] = {"bench_dir": str(root.parent)}  # tmpfs or disk: fsyncs differ
        for count in (n, 4 * n):
            build(root / str(count), count)
            seconds, fds = time_open(root / str(count))
            results[f"open_{count}_partitions_s"] = round(seconds, 3)
            results[f"open_{count}_partitions_fds"] = fds
        results["open_ratio_4n_over_n"] = round(
            float(results[f"open_{4 * n}_partitions_s"]) / float(results[f"open_{n}_partitions_s"]),  # type: ignore[arg-type]
            2,
        )
        with Storage.open(root / "create") as storage:
            started = time.perf_counter()
            storage.create_topic("wide", 5000)
            results["create_5000_partitions_s"] = round(time.perf_counter() - started, 3)
        save("partitions", results)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
