"""Property tests: whatever records go into build_batch come back out unchanged."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from logtrove.records import (
    Compression,
    NewRecord,
    Record,
    build_batch,
    count_records,
    iter_records,
    validate_batch,
    validate_produced_batch,
)
from logtrove.testing import FakeClock

from .helpers import codecs, expected_records, record_lists

OFFSETS = st.integers(min_value=0, max_value=2**62)


@settings(max_examples=150, deadline=None)
@given(records=record_lists, codec=codecs, base_offset=OFFSETS)
def test_built_batch_validates_and_decodes_to_its_records(records, codec, base_offset):
    batch = build_batch(records, compression=codec, base_offset=base_offset)

    header = validate_produced_batch(batch)

    assert header.size == len(batch)
    assert header.compression is codec
    assert header.record_count == len(records)
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert list(iter_records(batch)) == expected_records(records, base_offset)
    assert count_records(batch) == len(records)


@settings(max_examples=75, deadline=None)
@given(records=record_lists, codec=codecs)
def test_rebuilding_decoded_records_reproduces_the_batch(records, codec):
    batch = build_batch(records, compression=codec, producer_id=3, producer_epoch=1, base_sequence=9)

    rebuilt = build_batch(
        list(iter_records(batch)), compression=codec, producer_id=3, producer_epoch=1, base_sequence=9
    )

    assert rebuilt == batch


@settings(max_examples=75, deadline=None)
@given(
    records=record_lists,
    codec=codecs,
    data=st.data(),
)
def test_batch_that_lost_records_to_compaction_keeps_offsets_and_span(records, codec, data):
    kept = sorted(data.draw(st.sets(st.integers(0, len(records) - 1), min_size=1)))
    survivors = [records[i] for i in kept]
    batch = build_batch(
        survivors,
        compression=codec,
        offset_deltas=kept,
        last_offset_delta=len(records) - 1,
        base_timestamp=records[0].timestamp,
    )

    header = validate_batch(batch)

    assert header.last_offset_delta == len(records) - 1
    assert header.record_count == len(kept)
    decoded = list(iter_records(batch))
    assert [r.offset for r in decoded] == kept
    assert decoded == [expected_records(records)[i] for i in kept]
    assert count_records(batch) == len(kept)


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.tuples(record_lists, codecs), min_size=1, max_size=5))
def test_batches_written_back_to_back_are_walked_by_their_lengths(batches):
    log = bytearray()
    expected: list[Record] = []
    for records, codec in batches:
        log += build_batch(records, compression=codec, base_offset=len(expected))
        expected += expected_records(records, base_offset=len(expected))

    decoded: list[Record] = []
    pos = 0
    while pos < len(log):
        header = validate_batch(log, pos, expect_full=False)
        decoded += iter_records(log, pos, header)
        pos += header.size

    assert decoded == expected


def test_records_without_timestamp_get_the_clocks_time():
    clock = FakeClock(ms=1_234_567)
    records = [NewRecord(b"a"), NewRecord(b"b", timestamp=1_000_000), NewRecord(b"c")]

    batch = build_batch(records, clock=clock)

    assert [r.timestamp for r in iter_records(batch)] == [1_234_567, 1_000_000, 1_234_567]
    assert validate_batch(batch).max_timestamp == 1_234_567


def test_flags_are_written_into_the_attributes():
    batch = build_batch(
        [NewRecord(b"x", timestamp=1)],
        compression=Compression.ZSTD,
        transactional=True,
        control=True,
        log_append_time=True,
        producer_id=1,
        producer_epoch=0,
    )

    header = validate_batch(batch)

    assert header.attributes == 0x08 | 0x10 | 0x20 | int(Compression.ZSTD)
    assert header.is_transactional
    assert header.is_control
