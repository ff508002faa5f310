"""Range scans over a partition's unindexed tail: the tail's timestamps are summarised
once and extended as the log grows, a window that misses them skips the tail without
reading it, and the answers stay those of a full decode (a late record with an old
timestamp appended to the tail is found)."""

from __future__ import annotations

from pathlib import Path

import pytest

from logtrove.query import HeaderQuery, IdQuery, KeyQuery, QueryEngine, RangeQuery, tail
from logtrove.records import NewRecord, Record, build_batch
from logtrove.storage import Segment, Storage, TopicConfig
from logtrove.storage.derived.indexer import PartitionIndexer

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


def keyed(start: int, n: int) -> list[bytes]:
    """Batches of 20 records: keys ``k0``..``k49`` (every 97th null), an ID header (``m<i>``,
    every 10th repeated), an indexed ``user`` header and an unindexed ``other`` one."""
    out = []
    for b in range(start, start + n, 20):
        records = [
            NewRecord(
                b'{"n": %d, "pad": "%s"}' % (i, b"x" * 80),
                None if i % 97 == 0 else b"k%d" % (i % 50),
                (
                    ("id", b"m%d" % (i - i % 10 if i % 10 == 3 else i)),
                    ("user", b"u%d" % (i % 7)),
                    ("other", b"o"),
                ),
                T0 + i,
            )
            for i in range(b, b + 20)
        ]
        out.append(build_batch(records))
    return out


def test_hash_lookups_over_a_large_unindexed_tail_give_what_a_full_decode_gives(tmp_path: Path) -> None:

    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"index.headers": "user"})
        log = storage.log("t", 0)
        for batch in keyed(0, 3000):  # about 450 KB: more than a piece of the tail's tables
            log.append(batch)
        engine = QueryEngine(Storage.open(tmp_path, read_only=True))

        def check() -> int:
            records = everything(tmp_path)
            candidates = 0
            questions = [
                (KeyQuery("t", b"k7"), lambda r: r.key == b"k7"),
                (KeyQuery("t", b"k49"), lambda r: r.key == b"k49"),
                (IdQuery("t", "m1230", exhaustive=True), lambda r: ("id", b"m1230") in r.headers),
                (IdQuery("t", "m2999", exhaustive=True), lambda r: ("id", b"m2999") in r.headers),
                (HeaderQuery("t", "user", b"u3"), lambda r: ("user", b"u3") in r.headers),
                (HeaderQuery("t", "other", b"o"), lambda r: ("other", b"o") in r.headers),  # not indexed
            ]
            for query, match in questions:
                messages, completion = engine.run(query).all()
                assert [m.offset for m in messages] == [r.offset for r in reversed(records) if match(r)]
                candidates += completion.stats.index_candidates
            return candidates

        assert check() > 0  # the tail's in-memory tables answered
        for batch in keyed(3000, 2000):  # the tail grows: a second piece
            log.append(batch)
        assert check() > 0


def test_a_tail_left_behind_by_the_indexer_is_dropped(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"index.headers": "user"})
        log = storage.log("t", 0)
        for batch in keyed(0, 3000):
            log.append(batch)
        engine = QueryEngine(Storage.open(tmp_path, read_only=True))
        before = [m.offset for m in engine.run(KeyQuery("t", b"k7")).all()[0]]
        PartitionIndexer(log, block_records=1000).step(2000)  # two blocks: the tail starts later
        for batch in keyed(3000, 2000):
            log.append(batch)
        after = [m.offset for m in engine.run(KeyQuery("t", b"k7")).all()[0]]
        assert after[len(after) - len(before) :] == before
        assert after == [r.offset for r in reversed(everything(tmp_path)) if r.key == b"k7"]
        segment = str(log.segments[-1].log_path)
        assert len([k for k in tail._keys if k[0] == segment]) == 1
        assert len([k for k in tail._tails if k[0] == segment]) <= 1


def test_a_tail_growing_between_lookups_is_answered_from_tables_each_batch_parsed_once(
    tmp_path: Path,
) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"index.headers": "user"})
        log = storage.log("t", 0)
        reader = Storage.open(tmp_path, read_only=True)
        engine = QueryEngine(reader)
        start = 0
        for size in (20, 40, 20, 2000, 60, 1500, 20):  # pieces close at a quarter MiB, mid-way
            for batch in keyed(start, size):
                log.append(batch)
            start += size
            reader.refresh()
            seg = reader.log("t", 0).segments[-1]
            records = everything(tmp_path)
            for key in (b"k7", b"k31"):
                messages, _ = engine.run(KeyQuery("t", key)).all()
                assert [m.offset for m in messages] == [r.offset for r in reversed(records) if r.key == key]
            covered, tables = tail.tail_key_tables(seg, 0, seg.size, reader.log("t", 0).config)
            assert covered == seg.size  # nothing left to a raw scan
            entry = next(v for k, v in tail._keys.items() if k[0] == str(seg.log_path))
            assert len(tables) == len(entry.tables) + (entry.pending is not None)
            assert tail.tail_key_tables(seg, 0, seg.size, reader.log("t", 0).config)[1][-1] is tables[-1]
        reader.close()


def test_a_block_written_by_the_indexer_does_not_make_the_tail_be_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The indexer writes blocks while a producer appends: the tail's start moves forward
    into the tables already gathered. Only the batches appended since are parsed (the
    tables the block covers go, the one it ends in stays), and the lookups give what a
    full decode gives: no record the block holds is answered twice."""
    parsed: list[int] = []
    gather = tail._gather

    def counting(keys: tail._TailKeys, seg: Segment, end: int, config: TopicConfig) -> None:
        before = keys.pending_end
        gather(keys, seg, end, config)
        parsed.append(keys.pending_end - before)

    monkeypatch.setattr(tail, "_gather", counting)
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"index.headers": "user"})
        log = storage.log("t", 0)
        for batch in keyed(0, 5000):  # about 750 KB: several pieces
            log.append(batch)
        reader = Storage.open(tmp_path, read_only=True)
        engine = QueryEngine(reader)

        def lookups() -> int:
            """Parsed bytes of the lookups of a few keys, checked against a full decode."""
            parsed.clear()
            reader.refresh()
            records = everything(tmp_path)
            for key in (b"k7", b"k31", b"k0"):
                messages, _ = engine.run(KeyQuery("t", key)).all()
                assert [m.offset for m in messages] == [r.offset for r in reversed(records) if r.key == key]
            return sum(parsed)

        size = log.segments[-1].size
        assert lookups() == size  # the whole tail, once
        for blocks in (1, 2, 4):  # the start moves: into the first piece, past it, past more
            PartitionIndexer(log, block_records=1000).step(blocks * 1000)
            assert lookups() == 0  # nothing appended: nothing parsed again
            entry = next(v for k, v in tail._keys.items() if k[0] == str(log.segments[-1].log_path))
            assert entry.start > 0 and all(end > entry.start for end in entry.ends)
            assert entry.tables or blocks > 1  # the first block leaves tables after it
            for batch in keyed(5000 + 1000 * blocks, 1000):
                log.append(batch)
            grown = log.segments[-1].size
            assert lookups() == grown - size  # only what was appended
            size = grown
        reader.close()


def test_a_block_written_by_the_indexer_does_not_make_the_time_summary_read_the_tail_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for the hash tables: the summary's pieces the block covers go, the rest stay,
    so a range scan after each block reads only what was appended since; the answers
    stay those of a full decode (a late record with an old stamp in the tail included)."""
    summarised: list[int] = []
    summarise = tail._summarise

    def counting(t: tail._Tail, seg: Segment, end: int) -> None:
        before = t.end
        summarise(t, seg, end)
        summarised.append(t.end - before)

    monkeypatch.setattr(tail, "_summarise", counting)
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        log = storage.log("t", 0)
        append(storage, 0, 20_000, T0 + 100_000)  # about 1.5 MB: more than one piece
        reader = Storage.open(tmp_path, read_only=True)
        engine = QueryEngine(reader)

        def scans() -> int:
            """Bytes summarised by two range scans, checked against a full decode."""
            summarised.clear()
            reader.refresh()
            records = everything(tmp_path)
            for window in [(T0 + 20, T0 + 60), (T0 - 50, T0 + 100_100)]:
                got, _ = ranged(engine, *window)
                assert got == [r for r in records if window[0] <= r.timestamp < window[1]]
            return sum(summarised)

        size = log.segments[-1].size
        assert scans() == size  # the whole tail, once
        for blocks, late in ((1, False), (3, True), (12, False)):  # into a piece, past it, past more
            PartitionIndexer(log, block_records=1000).step(blocks * 1000)
            assert scans() == 0  # nothing appended: nothing read again
            entry = tail._tails[(str(log.segments[-1].log_path), log.segments[-1].inode)]
            assert entry.start > 0 and all(end > entry.start for end, _, _ in entry.pieces)
            append(storage, 20_000 + 1000 * blocks, 500, T0 + 200_000)
            if late:
                log.append(build_batch([NewRecord(b"late", b"k", (), T0 + 30)]))  # an old stamp
            grown = log.segments[-1].size
            assert scans() == grown - size  # only what was appended
            size = grown
        reader.close()
