"""Range scans over a partition's unindexed tail: the tail's timestamps are summarised
once and extended as the log grows, a window that misses them skips the tail without
reading it, and the answers stay those of a full decode (a late record with an old
timestamp appended to the tail is found)."""

from __future__ import annotations

from pathlib import Path

from logtrove.query import QueryEngine, RangeQuery
from logtrove.records import NewRecord, Record, build_batch
from logtrove.storage import Storage
from logtrove.storage.indexer import PartitionIndexer

T0 = 1_763_800_000_000


def append(storage: Storage, start: int, n: int, ts0: int) -> None:
    log = storage.log("t", 0)
    for i in range(start, start + n, 10):
        log.append(build_batch([NewRecord(b"v%d" % j, b"k", (), ts0 + j) for j in range(i, i + 10)]))


def everything(path: Path) -> list[Record]:
    with Storage.open(path, read_only=True) as reader:
        return list(reader.log("t", 0).records())


def ranged(engine: QueryEngine, start: int, end: int) -> tuple[list[Record], int]:
    messages, completion = engine.run(RangeQuery("t", start, end)).all()
    found = [Record(m.offset, m.timestamp, m.key, m.value, m.headers) for m in messages]
    return found, completion.stats.bytes_scanned


def test_an_old_window_skips_the_tail_and_a_late_old_record_in_it_is_found(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        append(storage, 0, 200, T0)  # indexed: T0 .. T0+199
        PartitionIndexer(storage.log("t", 0), block_records=50).step(10**9, flush_tail=True)
        append(storage, 200, 300, T0 + 100_000)  # the unindexed tail, stamped much later
        engine = QueryEngine(Storage.open(tmp_path, read_only=True))
        for window in [(T0 + 20, T0 + 60), (T0 + 100_250, T0 + 100_260), (T0 - 50, T0 + 200_000)]:
            got, _ = ranged(engine, *window)
            assert got == [r for r in everything(tmp_path) if window[0] <= r.timestamp < window[1]]
        got, scanned = ranged(engine, T0 + 20, T0 + 60)
        assert len(got) == 40
        indexed_bytes = sum(s.size for s in storage.log("t", 0).segments)  # an upper bound of the old part
        assert scanned < indexed_bytes / 2  # the tail (300 records) was not read again

        append(storage, 500, 20, T0 + 100_000)  # the tail grows: its summary is extended
        storage.log("t", 0).append(build_batch([NewRecord(b"late", b"k", (), T0 + 30)]))  # an old stamp
        got, _ = ranged(engine, T0 + 20, T0 + 60)
        assert got == [r for r in everything(tmp_path) if T0 + 20 <= r.timestamp < T0 + 60]
        assert got[-1].value == b"late" and len(got) == 41
