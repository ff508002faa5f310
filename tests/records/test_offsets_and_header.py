"""Offset assignment by patching, and what the decoded batch header reports."""

from __future__ import annotations

import pytest

from logtrove.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    NewRecord,
    assign_offsets,
    build_batch,
    iter_records,
    peek_batch_size,
    read_header,
    set_base_offset,
    set_log_append_time,
    validate_batch,
    validate_produced_batch,
)

from .helpers import T0, patch_header, sample_records


@pytest.fixture(params=list(Compression), ids=lambda c: c.name.lower())
def batch(request) -> bytes:
    return build_batch(sample_records(), compression=request.param)


def test_header_is_61_bytes_and_log_overhead_12():
    assert (HEADER_SIZE, LOG_OVERHEAD) == (61, 12)


# ── set_base_offset / assign_offsets ───────────────────────────────────────────


def test_set_base_offset_patches_offsets_without_invalidating_the_crc(batch):
    buf = bytearray(batch)

    set_base_offset(buf, 5_000)

    header = validate_produced_batch(buf)
    assert header.base_offset == 5_000
    assert header.crc == read_header(batch).crc
    assert buf[8:] == batch[8:]
    assert [r.offset for r in iter_records(buf)] == list(range(5_000, 5_000 + len(sample_records())))


def test_set_base_offset_patches_the_batch_at_a_position_in_a_larger_buffer(batch):
    log = bytearray(batch + batch)

    set_base_offset(log, 77, pos=len(batch))

    assert validate_batch(log, 0, expect_full=False).base_offset == 0
    assert validate_batch(log, len(batch)).base_offset == 77


def test_set_base_offset_works_through_a_memoryview(batch):
    buf = bytearray(batch)

    set_base_offset(memoryview(buf), 12)

    assert validate_batch(buf).base_offset == 12


def test_assign_offsets_returns_the_header_as_it_now_reads(batch):
    buf = bytearray(batch)
    header = validate_produced_batch(buf)

    patched = assign_offsets(buf, 1_000_000, header)

    assert patched == read_header(buf) == validate_produced_batch(buf)
    assert patched == header._replace(base_offset=1_000_000)
    assert patched.last_offset == 1_000_000 + len(sample_records()) - 1


def test_partition_leader_epoch_is_outside_the_crc(batch):
    bad_epoch = patch_header(batch, fix_crc=False, partition_leader_epoch=99)

    assert validate_batch(bad_epoch).partition_leader_epoch == 99


def test_set_log_append_time_stamps_every_record_and_keeps_the_crc_valid(batch):
    buf = bytearray(batch)

    set_log_append_time(buf, T0 + 999)

    header = validate_produced_batch(buf)
    assert header.attributes & 0x08
    assert header.max_timestamp == T0 + 999
    assert header.base_timestamp == read_header(batch).base_timestamp
    assert {r.timestamp for r in iter_records(buf)} == {T0 + 999}
    assert [r.value for r in iter_records(buf)] == [r.value for r in iter_records(batch)]


# ── BatchHeader properties ─────────────────────────────────────────────────────


def test_header_reports_offsets_size_and_compression():
    records = [NewRecord(b"v%d" % i, timestamp=T0 + i) for i in range(10)]
    batch = build_batch(records, base_offset=40, compression=Compression.LZ4)

    header = validate_produced_batch(batch)

    assert header.base_offset == 40
    assert header.last_offset_delta == 9
    assert header.last_offset == 49
    assert header.next_offset == 50
    assert header.size == len(batch) == header.batch_length + LOG_OVERHEAD
    assert header.compression is Compression.LZ4
    assert header.magic == 2
    assert (header.base_timestamp, header.max_timestamp) == (T0, T0 + 9)
    assert not header.is_transactional
    assert not header.is_control


def test_next_offset_follows_the_offset_span_not_the_record_count():
    records = [NewRecord(b"a", timestamp=1), NewRecord(b"b", timestamp=2)]
    compacted = build_batch(records, base_offset=10, offset_deltas=[0, 7], last_offset_delta=9)

    header = validate_batch(compacted)

    assert header.record_count == 2
    assert (header.last_offset, header.next_offset) == (19, 20)
    assert [r.offset for r in iter_records(compacted)] == [10, 17]


def test_max_timestamp_is_the_largest_even_when_records_go_back_in_time():
    records = [NewRecord(b"", timestamp=t) for t in (500, 900, 100, 700)]

    header = validate_batch(build_batch(records))

    assert (header.base_timestamp, header.max_timestamp) == (500, 900)


@pytest.mark.parametrize(
    ("base_sequence", "count", "last_sequence"),
    [(-1, 5, -1), (0, 1, 0), (10, 5, 14), (2**31 - 2, 3, 0), (2**31 - 1, 1, 2**31 - 1)],
)
def test_last_sequence_wraps_at_int32_like_kafka(base_sequence, count, last_sequence):
    records = [NewRecord(b"x", timestamp=1)] * count
    batch = build_batch(records, producer_id=1, producer_epoch=0, base_sequence=base_sequence)

    assert read_header(batch).last_sequence == last_sequence


def test_peek_batch_size_reads_the_length_prefix_only(batch):
    assert peek_batch_size(batch) == len(batch)
    assert peek_batch_size(batch[:LOG_OVERHEAD]) == len(batch)
    assert peek_batch_size(batch[: LOG_OVERHEAD - 1]) is None
    assert peek_batch_size(b"xx" + batch, pos=2) == len(batch)
