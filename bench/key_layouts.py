"""Key lookups over ``.keyidx`` blocks grouped by slot (version 4) against the same blocks
chained (versions 1-3, RocketMQ's IndexFile layout), interleaved in one process on one
data set, so that a machine whose speed drifts between runs drifts for both alike.

The chained copy is made once beside the data set ``bench/query_bench.py`` built and kept
(``<data>-chained``): the segments and their other files hard-linked, each ``.keyidx``
rewritten by :func:`logtrove.testing.old_formats.rewrite_as_version_3` (same entries,
same log ranges). Rounds alternate which layout goes first; each round runs the same
queries, and both layouts' answers are checked equal. ::

    BENCH_QUERY_DATA=/work/qdata PYTHONPATH=src:bench python bench/key_layouts.py

Saves ``bench/results/key-layouts.json``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from _common import save, summary_us
from logtrove.query import Query, QueryEngine
from logtrove.storage import Storage
from logtrove.storage.derived import keyindex
from logtrove.testing.old_formats import rewrite_as_version_3
from query_fastpaths import QUERIES, hash_lookup_sets

ROUNDS = 6


def chained_copy(data: Path) -> Path:
    """``<data>-chained``: the data set with every ``.keyidx`` rewritten chained (made once)."""
    copy = data.with_name(data.name + "-chained")
    done = copy / ".complete"
    if done.exists():
        return copy
    shutil.rmtree(copy, ignore_errors=True)
    (copy / "data").mkdir(parents=True)
    for source in (data / "data").rglob("*"):
        target = copy / "data" / source.relative_to(data / "data")
        if source.is_dir():
            target.mkdir(exist_ok=True)
        elif source.suffix == keyindex.SUFFIX:
            shutil.copyfile(source, target)
            rewrite_as_version_3(target, int(source.stem))
        else:
            os.link(source, target)
    done.touch()
    return copy


def timed(engine: QueryEngine, queries: list[Query]) -> tuple[list[float], list[list[int]]]:
    times, answers = [], []
    for q in queries:
        t = time.perf_counter()
        found = engine.run(q).all()[0]
        times.append(time.perf_counter() - t)
        answers.append([m.offset for m in found])
    return times, answers


def main() -> None:
    data = Path(os.environ.get("BENCH_QUERY_DATA", ""))
    if not (data / "data").is_dir():
        sys.exit("set BENCH_QUERY_DATA to a data set bench/query_bench.py built and kept")
    t = time.perf_counter()
    chained = chained_copy(data)
    print(f"chained copy at {chained} ({time.perf_counter() - t:.0f} s)", flush=True)
    engines = {
        "grouped": QueryEngine(Storage.open(data / "data", read_only=True)),
        "chained": QueryEngine(Storage.open(chained / "data", read_only=True)),
    }
    sets = hash_lookup_sets(data)
    results: dict[str, Any] = {"rounds": ROUNDS, "queries": QUERIES}
    for name, queries in sets.items():
        samples: dict[str, list[float]] = {label: [] for label in engines}
        answers = {label: timed(engine, queries)[1] for label, engine in engines.items()}  # warm both
        if answers["grouped"] != answers["chained"]:
            sys.exit(f"{name}: the two layouts answered differently")
        for r in range(ROUNDS):
            for label in ("chained", "grouped") if r % 2 else ("grouped", "chained"):
                samples[label] += timed(engines[label], queries)[0]
        results[name] = {label: summary_us(s) for label, s in samples.items()}
        print(name, results[name], flush=True)
    save("key-layouts", results)


if __name__ == "__main__":
    main()
