"""The hash lookups' compiled paths against the general paths they bypass, interleaved in
one process on one data set, so that a machine whose speed drifts between runs (this one
does, by up to 1.7x over minutes) drifts for both alike.

* candidate check: ``RecordReader.record_at``'s one read into its buffer and one
  compiled call (``records.pick.find_record``) against the general read (the batch the
  segment finds, then the record picked from it), which every candidate took before;
* block probes: ``KeyReader.probe_all`` (``keyindex.probe_tables``: several key blocks
  in one call over their slot tables in memory) against one probe per block.

"before" turns both off, "after" is the code as it is. Rounds alternate which goes first;
each round runs the same queries. Runs over a data set ``bench/query_bench.py`` built and
kept::

    BENCH_QUERY_DATA=/work/qdata PYTHONPATH=src:bench python bench/query_fastpaths.py

Saves ``bench/results/query-fastpaths.json``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from _common import save, summary_us
from logtrove.query import HeaderQuery, IdQuery, KeyQuery, Query, QueryEngine, picking
from logtrove.records import Record
from logtrove.storage import Storage
from logtrove.storage.derived import views

ROUNDS = 6
QUERIES = 200
COMPILED_AT = picking.RecordReader.record_at
COMPILED_PROBES = views.KeyReader.probe_all


def general_read(self: picking.RecordReader, offset: int) -> Record | None:
    held = picking.batch_holding(self.seg, offset)
    if held is None or held[1].base_offset > offset:
        return None
    return self._pick(*held, offset)


def block_by_block(
    self: views.KeyReader, blocks: object, digest: int, low: int = 0, high: int | None = None
) -> None:
    return None


def use(compiled: bool) -> None:
    picking.RecordReader.record_at = COMPILED_AT if compiled else general_read  # type: ignore[method-assign]
    views.KeyReader.probe_all = COMPILED_PROBES if compiled else block_by_block  # type: ignore[assignment,method-assign]


def timed(engine: QueryEngine, queries: list[Query]) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        engine.run(q).all()
        out.append(time.perf_counter() - t)
    return out


def hash_lookup_sets(data: Path) -> dict[str, list[Query]]:
    """The hash lookups both interleaved benchmarks time, :data:`QUERIES` of each type,
    over the data set ``bench/query_bench.py`` built in ``data``."""
    ids = json.loads((data / "ids.json").read_text())
    rng = random.Random(1)
    return {
        "key_all_matches": [KeyQuery("q", b"key-%d" % rng.randrange(100_000)) for _ in range(QUERIES)],
        "key_absent": [KeyQuery("q", b"absent-%d" % rng.randrange(10**9)) for _ in range(QUERIES)],
        "client_id": [IdQuery("q", rng.choice(ids)) for _ in range(QUERIES)],
        "header_limit_100": [
            HeaderQuery("q", "user", b"user-%d" % rng.randrange(5000), limit=100) for _ in range(QUERIES)
        ],
    }


def main() -> None:
    data = Path(os.environ.get("BENCH_QUERY_DATA", ""))
    if not (data / "data").is_dir():
        sys.exit("set BENCH_QUERY_DATA to a data set bench/query_bench.py built and kept")
    engine = QueryEngine(Storage.open(data / "data", read_only=True))
    sets = hash_lookup_sets(data)
    results: dict[str, Any] = {"rounds": ROUNDS, "queries": QUERIES}
    for name, queries in sets.items():
        samples: dict[str, list[float]] = {"before": [], "after": []}
        for compiled in (False, True):  # warm both
            use(compiled)
            timed(engine, queries)
        for r in range(ROUNDS):
            for label in ("after", "before") if r % 2 else ("before", "after"):
                use(label == "after")
                samples[label] += timed(engine, queries)
        use(True)
        results[name] = {label: summary_us(s) for label, s in samples.items()}
        print(name, results[name], flush=True)
    save("query-fastpaths", results)


if __name__ == "__main__":
    main()
