"""Lookups that decode only the records they need give what decoding every record gives:
over compressed and LogAppendTime batches, and over a batch whose records an older
version stored damaged (CRC valid), where the strict pickers refuse it and the row-wise
readers answer as before (the records before the damage, then a warning)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from logtrove.query import KeyQuery, QueryEngine, RangeQuery
from logtrove.records import Compression, NewRecord, Record, RecordsError, build_batch, iter_records
from logtrove.records.batch import CRC_START
from logtrove.records.varint import encode_varint
from logtrove.storage import Segment, Storage
from logtrove.storage.derived.indexer import Indexer

T0 = 1_763_800_000_000
TOPIC = "t"


def write(path: Path, *, damaged_batch: int | None = None, append_time: bool = False) -> None:
    """Ten batches of 20 records (keys ``k0``..``k6``, a header, timestamps 10 ms apart
    ±30 ms); every third batch compressed. ``damaged_batch``: the header name of its 8th
    record becomes invalid UTF-8 on disk, the batch's CRC rewritten to match."""
    storage = Storage.open(path)
    config = {"segment.bytes": "6000"}
    if append_time:
        config["message.timestamp.type"] = "LogAppendTime"
    storage.create_topic(TOPIC, 1, config)
    log = storage.log(TOPIC, 0)
    n = 0
    for b in range(10):
        records = []
        for _ in range(20):
            ts = T0 + 10 * n + (37 * n) % 61 - 30
            records.append(NewRecord(b"value-%d" % n, b"k%d" % (n % 7), (("hdr", b"x%d" % n),), ts))
            n += 1
        codec = Compression.GZIP if b % 3 == 0 else Compression.NONE
        log.append(build_batch(records, compression=codec))
    Indexer(storage, block_records=50).catch_up()
    storage.close()
    if damaged_batch is not None:
        damage(path, damaged_batch)


def damage(path: Path, batch_index: int) -> None:
    seg_files = sorted((path / f"{TOPIC}-0").glob("*.log"))
    storage = Storage.open(path, read_only=True)
    found = None
    for seg in storage.log(TOPIC, 0).segments:
        for position, header in seg.batches():
            if header.base_offset == 20 * batch_index:
                found = (seg.log_path, position, header)
    storage.close()
    assert found is not None and seg_files
    log_path, position, header = found
    assert header.compression is Compression.NONE
    data = bytearray(log_path.read_bytes())
    batch = data[position : position + header.size]
    value = b"x%d" % (20 * batch_index + 7)
    i = bytes(batch).index(b"hdr" + encode_varint(len(value)) + value)  # that record's header
    batch[i : i + 3] = b"\xff\xfe\xfd"
    batch[17:CRC_START] = crc32c.crc32c(bytes(batch[CRC_START:])).to_bytes(4, "big")
    data[position : position + header.size] = batch
    log_path.write_bytes(bytes(data))


def brute_force(path: Path) -> list[Record]:
    """Every record, decoding each batch row by row; a damaged batch gives the records
    before the damage (what the range scan always gave)."""
    storage = Storage.open(path, read_only=True)
    out: list[Record] = []
    for header, data in storage.log(TOPIC, 0).batches(0, None):
        try:
            for record in iter_records(data, 0, header):
                out.append(record)
        except RecordsError:
            pass
    storage.close()
    return out


def found(engine: QueryEngine, query: RangeQuery | KeyQuery) -> list[Record]:
    return [Record(m.offset, m.timestamp, m.key, m.value, m.headers) for m in engine.run(query).all()[0]]


@pytest.mark.parametrize("append_time", [False, True], ids=["create-time", "log-append-time"])
def test_ranges_and_keys_give_what_a_full_decode_gives(tmp_path: Path, append_time: bool) -> None:
    write(tmp_path, append_time=append_time)
    everything = brute_force(tmp_path)
    engine = QueryEngine(Storage.open(tmp_path, read_only=True))
    stamps = sorted({r.timestamp for r in everything})
    windows = [(stamps[0], stamps[-1] + 1), (T0 + 500, T0 + 700), (T0 + 1234, T0 + 1240), (T0 - 99, T0)]
    for start, end in windows:
        want = [r for r in everything if start <= r.timestamp < end]
        got = found(engine, RangeQuery(TOPIC, start, end))
        assert sorted(got, key=lambda r: r.offset) == want
    for k in range(8):
        key = b"k%d" % k
        got = found(engine, KeyQuery(TOPIC, key))
        assert got == [r for r in reversed(everything) if r.key == key]


def test_a_damaged_batch_gives_the_records_before_the_damage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, damaged_batch=4)
    everything = brute_force(tmp_path)
    assert len(everything) == 200 - 13  # the 8th record of batch 4 and those after it are lost
    engine = QueryEngine(Storage.open(tmp_path, read_only=True))
    with caplog.at_level(logging.WARNING):
        got = found(engine, RangeQuery(TOPIC, T0 - 100, T0 + 10_000))
    assert sorted(got, key=lambda r: r.offset) == everything
    assert any("batch at offset 80 skipped" in m for m in caplog.messages)
    # the records around the damaged one are found by key (only they are decoded); the
    # damaged record itself is refused as the row-wise reader refuses it
    offsets = [r.offset for r in found(engine, KeyQuery(TOPIC, b"k%d" % (81 % 7)))]
    assert 81 in offsets and 88 in offsets
    with pytest.raises(RecordsError):
        engine.run(KeyQuery(TOPIC, b"k%d" % (87 % 7))).all()


@pytest.mark.parametrize("interval", ["1", "300", "100000"])  # every batch indexed, some, none
def test_the_batch_holding_an_offset_is_the_one_the_segment_finds(tmp_path: Path, interval: str) -> None:
    """The point read's first read ends at the next index entry when that is nearer: the
    batch it answers must still be the one :meth:`Segment.find` walks to, also for
    offsets that compaction removed (the next surviving batch, past that entry)."""
    from logtrove.query.picking import batch_holding
    from logtrove.storage.cleaner import Cleaner

    storage = Storage.open(tmp_path)
    storage.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "index.interval.bytes": interval})
    log = storage.log(TOPIC, 0)
    for b in range(30):
        log.append(
            build_batch([NewRecord(b"v%d" % (b * 5 + i), b"k%d" % ((b * 5 + i) % 9)) for i in range(5)])
        )
    log.roll()
    Cleaner(storage).clean(log)  # the older values of each key go: gaps between batches
    try:
        for seg in log.segments:
            found = [seg.find(o) for o in range(seg.base_offset - 1, seg.next_offset + 2)]
            held = [batch_holding(seg, o) for o in range(seg.base_offset - 1, seg.next_offset + 2)]
            assert [None if h is None else (h[0], h[1]) for h in held] == found
            for h in held:
                if h is not None:  # the buffer holds the whole batch at its position
                    position, header, buf, rel = h
                    assert buf[rel : rel + header.size] == seg.read(position, header.size)
        assert any(
            seg.find(o) is not None and seg.find(o)[1].base_offset > o
            for seg in log.segments
            for o in range(150)
        )
    finally:
        storage.close()


def general_read(seg: Segment, offset: int) -> object:
    """What a candidate check answered before the compiled walk: the batch the segment
    finds, then the record picked from it (row-wise where the picker refuses it)."""
    from logtrove.query.model import Stats
    from logtrove.query.picking import RecordReader, batch_holding

    stats = Stats()
    held = batch_holding(seg, offset)
    try:
        got = (
            None
            if held is None or held[1].base_offset > offset
            else RecordReader(seg, stats)._pick(*held, offset)
        )
    except RecordsError as exc:
        return f"{type(exc).__name__}: {exc}", stats.bytes_scanned
    return got, stats.bytes_scanned


def compacted(path: Path, interval: str) -> None:
    """24 batches of 5 records, every fourth LZ4-compressed, batch 7 larger than a
    candidate's first read (32 KiB), then compacted: gaps between the batches."""
    from logtrove.storage.cleaner import Cleaner

    storage = Storage.open(path)
    storage.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "index.interval.bytes": interval})
    log = storage.log(TOPIC, 0)
    n = 0
    for b in range(24):
        pad = b"x" * (40_000 if b == 7 else 20)
        records = [
            NewRecord(b"v%d-" % (n + i) + pad, b"k%d" % ((n + i) % 11), (("h", b"%d" % i),)) for i in range(5)
        ]
        n += 5
        log.append(build_batch(records, compression=Compression.LZ4 if b % 4 == 1 else Compression.NONE))
    log.roll()
    Cleaner(storage).clean(log)
    storage.close()


@pytest.mark.parametrize(
    "make",
    [
        lambda p: compacted(p, "1"),  # every batch indexed: the first read is one batch
        lambda p: compacted(p, "5000"),
        lambda p: compacted(p, "100000"),  # no entry: reads from the segment's start
        lambda p: write(p, damaged_batch=4),  # a record the pickers refuse
        lambda p: write(p, append_time=True),
    ],
    ids=["compacted-every-batch-indexed", "compacted-some", "compacted-none", "damaged", "log-append-time"],
)
def test_a_candidate_check_gives_what_reading_its_batch_gives(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    """For every offset, :meth:`RecordReader.record_at` (one read into its buffer and one
    compiled call where they decide) answers what the general read answers (the batch
    the segment finds, then the record picked from it), with the same bytes counted."""
    from logtrove.query.model import Stats
    from logtrove.query.picking import RecordReader

    make(tmp_path)
    reader = Storage.open(tmp_path, read_only=True)
    try:
        for seg in reader.log(TOPIC, 0).segments:
            for offset in range(seg.base_offset - 1, seg.next_offset + 2):
                stats = Stats()
                try:
                    got: object = RecordReader(seg, stats).record_at(offset)
                except RecordsError as exc:
                    got = f"{type(exc).__name__}: {exc}"
                assert (got, stats.bytes_scanned) == general_read(seg, offset), offset
    finally:
        reader.close()
