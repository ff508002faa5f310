"""Reads and lookups of a partition log, with the edge cases spelled out: ranges, whole
batches, time lookups over out-of-order timestamps, LogAppendTime, gaps in offsets, and
the sparse index layout."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from logtrove.records import BatchHeader, Compression, NewRecord, build_batch, validate_batch
from logtrove.records.walk import MAX_KEYLESS_REPORTED
from logtrove.storage import InvalidRecordError, OffsetOutOfRangeError, Span, Storage
from logtrove.storage.index import OffsetIndex, TimeIndex
from logtrove.testing import FakeClock

from .helpers import TOPIC, decode_batches, files_of, open_topic


def stamped(*timestamps: int, size: int = 10) -> bytes:
    return build_batch([NewRecord(b"x" * size, b"k", (), ts) for ts in timestamps])


def test_read_outside_the_log_raises_with_the_valid_range(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, segment_bytes="1024")
    for _ in range(30):
        log.append(stamped(1, 2, 3, size=30))
    storage.truncate_before(TOPIC, 0, 40)
    for offset in (-1, 39, 91, 10**12):
        with pytest.raises(OffsetOutOfRangeError) as excinfo:
            log.read(offset, 100)
        assert (excinfo.value.log_start_offset, excinfo.value.log_end_offset) == (40, 90)
    empty = log.read(90, 100)
    assert (empty.size, empty.first_offset, empty.data()) == (0, None, b"")
    assert log.read(40, 1).first_offset == 39  # the batch holding 40 starts at 39
    storage.close()


def test_read_returns_at_least_one_whole_batch_and_never_more_than_asked(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, segment_bytes="8192", index_interval_bytes="100")
    sizes = []
    for i in range(40):
        sizes.append(len(stamped(*range(1 + i % 4), size=40)))
        log.append(stamped(*range(1 + i % 4), size=40))
    one = log.read(0, 0)
    assert one.size == sizes[0]
    for max_bytes in (sizes[0], sizes[0] + 1, 500, 1000, 3000):
        result = log.read(0, max_bytes)
        assert result.size <= max(max_bytes, sizes[0])
        batches = list(decode_batches(result.data()))
        got = sum(len(records) for _, _, records in batches)
        assert result.size == sum(sizes[: len(batches)])
        assert len(batches) == len(sizes) or result.size + sizes[len(batches)] > max_bytes
        assert got == sum(1 + i % 4 for i in range(len(batches)))
    storage.close()


def test_read_stops_at_the_end_of_a_segment(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, segment_bytes="1024")
    for _ in range(30):
        log.append(stamped(1, size=200))
    first = log.segments[0]
    result = log.read(0, 1 << 20)
    assert result.size == first.size
    assert list(decode_batches(result.data()))[-1][1] == first.next_offset - 1
    storage.close()


def test_offset_for_timestamp_finds_the_first_record_in_offset_order(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, segment_bytes="1024", index_interval_bytes="0")
    log.append(stamped(100, 500, 200))  # 0 1 2
    log.append(stamped(50))  # 3
    log.append(stamped(300, 300))  # 4 5
    log.roll()
    log.append(stamped(900, 10))  # 6 7
    cases = {0: 0, 50: 0, 100: 0, 101: 1, 400: 1, 500: 1, 501: 6, 900: 6, 901: None}
    for target, offset in cases.items():
        found = log.offset_for_timestamp(target)
        assert (found.offset if found else None) == offset, target
    assert log.offset_for_timestamp(250).timestamp == 500  # type: ignore[union-attr]
    storage.truncate_before(TOPIC, 0, 2)
    assert log.offset_for_timestamp(101).offset == 2  # type: ignore[union-attr]
    assert log.offset_for_timestamp(201).offset == 4  # type: ignore[union-attr]
    assert log.offset_for_timestamp(0).offset == 2  # type: ignore[union-attr]
    storage.close()


def test_max_timestamp_offset_ignores_records_below_the_log_start(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path)
    log.append(stamped(100, 5, 7, 7))
    found = log.max_timestamp_offset()
    assert (found.offset, found.timestamp) == (0, 100)  # type: ignore[union-attr]
    storage.truncate_before(TOPIC, 0, 1)
    found = log.max_timestamp_offset()
    assert (found.offset, found.timestamp) == (2, 7)  # type: ignore[union-attr]
    storage.truncate_before(TOPIC, 0, 4)
    assert log.max_timestamp_offset() is None
    storage.close()


def test_log_append_time_topic_stamps_batches_with_the_broker_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, message_timestamp_type="LogAppendTime")
    result = log.append(stamped(1, 2, 3))
    assert result.log_append_time == clock.now_ms()
    clock.advance(10)
    log.append(stamped(4))
    records = [r for _, _, rs in decode_batches(log.read(0, 1000).data()) for r in rs]
    assert [r.timestamp for r in records] == [clock.now_ms() - 10] * 3 + [clock.now_ms()]
    assert log.offset_for_timestamp(clock.now_ms() - 5).offset == 3  # type: ignore[union-attr]
    storage.close()


def test_compacted_topic_refuses_keyless_records_and_appends_nothing(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, cleanup_policy="compact")
    log.append(stamped(1))
    before = files_of(log.directory)
    with pytest.raises(InvalidRecordError):
        log.append(build_batch([NewRecord(b"v", b"k", (), 1), NewRecord(b"v", None, (), 1)]))
    assert log.log_end_offset == 1
    log.flush()
    assert files_of(log.directory) == before
    storage.close()


def test_compacted_topic_names_each_keyless_record_up_to_the_cap(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, cleanup_policy="compact")
    for n in (9, MAX_KEYLESS_REPORTED * 2 + 2):
        keyless = [i for i in range(n) if i % 2]
        recs = [NewRecord(b"v", None if i % 2 else b"k", (), 1) for i in range(n)]
        with pytest.raises(InvalidRecordError) as refused:
            log.append(build_batch(recs, compression=Compression.LZ4))
        assert [i for i, _ in refused.value.record_errors] == keyless[:MAX_KEYLESS_REPORTED]
        assert f"{len(keyless)} of the batch's {n} have none (the first at batch offset +1" in str(
            refused.value
        )
    assert "the first 1000 named" in str(refused.value)
    assert log.log_end_offset == 0
    storage.close()


def test_batches_keeping_their_offsets_leave_gaps_that_reads_skip(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path)
    raw = bytearray(stamped(1, 2))
    struct.pack_into(">q", raw, 0, 10)
    log.append(bytes(raw), assign_offsets=False)
    assert log.log_end_offset == 12
    result = log.read(0, 100)
    assert result.first_offset == 10  # the next surviving batch
    with pytest.raises(Exception, match="below the log end"):
        log.append(bytes(raw), assign_offsets=False)
    assert log.append(stamped(3)).base_offset == 12
    storage.close()


def test_segment_files_are_named_by_base_offset(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, segment_bytes="1024")
    for _ in range(20):
        log.append(stamped(1, 2, 3, size=60))
    names = sorted(p.name for p in log.directory.iterdir())
    bases = [s.base_offset for s in log.segments]
    for base in bases:
        for suffix in (".log", ".index", ".timeindex"):
            assert f"{base:020d}{suffix}" in names
    assert len(names) == 3 * len(bases)
    storage.close()


@pytest.mark.parametrize("interval", [0, 100, 1000, 4096])
def test_index_entries_are_written_every_index_interval_bytes(tmp_path: Path, interval: int) -> None:
    storage, log = open_topic(tmp_path, index_interval_bytes=str(interval))
    for i in range(60):
        log.append(stamped(1000 + i, size=90))
    storage.close()
    data = (log.directory / f"{0:020d}.log").read_bytes()
    index = OffsetIndex(log.directory / f"{0:020d}.index", 0)
    index.load(len(data))
    expected = []
    since = 0
    pos = 0
    for _ in range(60):
        header = validate_batch(data[pos : pos + len(stamped(0, size=90))])
        if since > interval:
            expected.append((header.base_offset, pos))
            since = 0
        since += header.size
        pos += header.size
    assert index.entries() == expected
    time_index = TimeIndex(log.directory / f"{0:020d}.timeindex", 0)
    time_index.load(60)
    assert time_index.entries() == [(1000 + o, o) for o, _ in expected]


def test_reader_snapshot_cutting_an_indexed_batch_ends_at_the_batch_before(tmp_path: Path) -> None:
    """A read-only opening takes the log's size before it reads the index, so a writer's
    batch in flight can be cut by the size while its index entry is already there: the
    segment must end at the last whole batch, not at its base offset."""
    storage, log = open_topic(tmp_path, index_interval_bytes="0")
    for i in range(10):
        log.append(stamped(1000 + i, 1000 + i, size=50))
    storage.close()
    path = log.directory / f"{0:020d}.log"
    whole = path.stat().st_size
    last_size = len(stamped(0, 0, size=50))
    with path.open("r+b") as f:
        f.truncate(whole - last_size // 2)  # as a reader's snapshot sees the last write
    reader = Storage.open(tmp_path, read_only=True)
    seen = reader.log(TOPIC, 0)
    assert seen.log_end_offset == 18
    assert seen.segments[-1].size == whole - last_size
    assert [b for b, _, _ in decode_batches(seen.read(16, 10_000).data())] == [16]
    reader.close()


def test_reader_drops_segments_the_writer_deleted(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, segment_bytes="1024")
    for _ in range(40):
        log.append(stamped(1, 2, size=100))
    storage.flush_all()
    reader = Storage.open(tmp_path, read_only=True, clock=clock)
    seen = reader.log(TOPIC, 0)
    held = seen.read(0, 10_000)
    storage.truncate_before(TOPIC, 0, 50)
    clock.advance(60_000)
    log.purge_deleted()
    reader.refresh()
    assert seen.log_start_offset >= 40
    assert seen.segments[0].base_offset == log.segments[0].base_offset
    assert held.data()[:8] == bytes(8)  # the open file still serves the old fetch
    reader.close()
    storage.close()


def test_offset_jump_into_an_empty_log_replaces_its_empty_segment(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path)
    far = 2**40
    raw = bytearray(stamped(1, 2))
    struct.pack_into(">q", raw, 0, far)
    log.append(bytes(raw), assign_offsets=False)  # too far for a segment based at 0
    assert [s.base_offset for s in log.segments] == [far]
    assert (log.log_start_offset, log.log_end_offset) == (far, far + 2)
    storage.close()
    storage, log = open_topic(tmp_path)
    assert [s.base_offset for s in log.segments] == [far]
    assert (log.log_start_offset, log.log_end_offset) == (far, far + 2)
    assert [r.offset for r in log.records()] == [far, far + 1]
    storage.close()


def test_offset_jump_past_a_segment_span_rolls(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path)
    log.append(stamped(1))
    raw = bytearray(stamped(1, 2))
    struct.pack_into(">q", raw, 0, 2**33)
    log.append(bytes(raw), assign_offsets=False)
    assert [s.base_offset for s in log.segments] == [0, 2**33]
    assert log.read(1, 100).first_offset == 2**33
    storage.close()


def test_segment_max_timestamp_offset_is_where_it_is_first_reached_after_reopen(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, index_interval_bytes="0")
    log.append(stamped(100, 7))  # 0 1: 100 first reached at 0
    log.append(stamped(5))  # 2: indexed
    log.append(stamped(100))  # 3: a tie, after the last index entry
    storage.close()
    storage, log = open_topic(tmp_path)
    assert log.segments[0].max_timestamp_offset == 0
    found = log.max_timestamp_offset()
    assert (found.offset, found.timestamp) == (0, 100)  # type: ignore[union-attr]
    storage.close()


def _triples(spans: Iterator[Span]) -> Iterator[tuple[BatchHeader, bytes, int]]:
    return ((span.header, span.buffer, span.at) for span in spans)


def _spans_as_batches(spans: Iterator[tuple[BatchHeader, bytes, int]]) -> list[tuple[BatchHeader, bytes]]:
    return [(header, bytes(buf[pos : pos + header.size])) for header, buf, pos in spans]


def test_batch_spans_give_the_batches_of_every_range_whatever_the_read_size(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, segment_bytes="4096")
    for i in range(60):  # batches of 1-5 records, one of them larger than the reads below
        log.append(stamped(*range(1 + i % 5), size=900 if i == 17 else 20 + i))
    log.flush()
    read_only = Storage.open(tmp_path, read_only=True)
    try:
        ro_log = read_only.log(TOPIC, 0)
        assert len(ro_log.segments) > 3
        end = ro_log.log_end_offset
        ranges = ((0, None), (0, end), (7, 8), (11, 95), (40, end - 3), (end - 1, None), (end, None))
        for start, stop in ranges:
            expected = list(ro_log.batches(start, stop))
            assert _spans_as_batches(ro_log.batch_spans(start, stop)) == expected
        for seg in ro_log.segments:
            whole = [(h, seg.read(pos, h.size)) for pos, h in seg.batches()]
            for chunk in (61, 100, 1000, 1 << 20):
                assert _spans_as_batches(_triples(seg.spans(0, max_read=chunk))) == whole
    finally:
        read_only.close()
        storage.close()


def test_batch_spans_stop_where_batches_stop_at_a_torn_tail(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, segment_bytes="1048576")
    for i in range(20):
        log.append(stamped(i, i + 1, size=50))
    log.flush()
    tail = stamped(99, size=50)
    with log.segments[-1].log_path.open("ab") as f:  # a writer caught mid-append
        f.write(tail[:-10])  # a whole header, a batch 10 bytes short
    read_only = Storage.open(tmp_path, read_only=True)
    try:
        ro_log = read_only.log(TOPIC, 0)
        expected = list(ro_log.batches(0, None))
        assert len(expected) == 20
        assert _spans_as_batches(ro_log.batch_spans(0, None)) == expected
        assert _spans_as_batches(_triples(ro_log.segments[-1].spans(0, max_read=100))) == expected
    finally:
        read_only.close()
        storage.close()


@pytest.mark.parametrize("damage", ["header name", "record count"])
def test_a_damaged_batch_gives_its_records_before_the_damage_then_the_row_readers_error(
    tmp_path: Path, damage: str
) -> None:
    """``records()`` decodes each batch whole (the columnar decoder); a batch stored
    damaged (CRC valid) must still give what the row-by-row reader gives: the records
    before the damage, then its error, and nothing of the batches after."""
    import crc32c

    from logtrove.records import RecordsError, iter_records
    from logtrove.records.batch import CRC_START
    from logtrove.records.varint import encode_varint

    storage, log = open_topic(tmp_path)
    for b in range(3):
        log.append(
            build_batch(
                [NewRecord(b"v%d" % (10 * b + i), None, (("hdr", b"x%d" % (10 * b + i)),)) for i in range(10)]
            )
        )
    log.flush()
    path, (position, header) = log.segments[0].log_path, list(log.segments[0].batches())[1]
    data = bytearray(path.read_bytes())
    batch = data[position : position + header.size]
    if damage == "header name":  # the 8th record's header name is no longer UTF-8
        i = bytes(batch).index(b"hdr" + encode_varint(3) + b"x17")
        batch[i : i + 3] = b"\xff\xfe\xfd"
    else:  # the batch declares one record more than it holds
        batch[57:61] = (header.record_count + 1).to_bytes(4, "big")
    batch[17:CRC_START] = crc32c.crc32c(bytes(batch[CRC_START:])).to_bytes(4, "big")
    data[position : position + header.size] = batch
    path.write_bytes(bytes(data))
    storage.close()

    reader = Storage.open(tmp_path, read_only=True)
    try:
        rowwise: list[object] = []
        with pytest.raises(RecordsError) as expected:
            for seg in reader.log(TOPIC, 0).segments:
                for pos, h in seg.batches():
                    rowwise.extend((r.offset, r.value) for r in iter_records(seg.read(pos, h.size), 0, h))
        got: list[object] = []
        with pytest.raises(RecordsError) as raised:
            got.extend((r.offset, r.value) for r in reader.log(TOPIC, 0).records())
        assert got == rowwise and len(got) >= 10
        assert type(raised.value) is type(expected.value) and str(raised.value) == str(expected.value)
    finally:
        reader.close()
