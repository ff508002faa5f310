"""record_span + decode_record give, for every offset, the record a full decode finds
first at or after it: produced batches (one record per offset, skipped into by count),
compacted ones (offset gaps, walked) and batches whose deltas lie about being dense."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from logtrove.records import Compression, NewRecord, Record, build_batch, iter_records, read_header
from logtrove.records.record import batch_payload, decode_record, record_span, timestamp_bounds

records = st.lists(
    st.builds(
        NewRecord,
        value=st.none() | st.binary(max_size=300),
        key=st.none() | st.binary(max_size=40),
        headers=st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3).map(
            tuple
        ),
        timestamp=st.integers(0, 2**40),
    ),
    min_size=1,
    max_size=40,
)


def first_at_or_after(batch: bytes, offset: int) -> Record | None:
    header = read_header(batch)
    payload = batch_payload(batch, header)
    span = record_span(payload, header, offset)
    if span is None:
        return None
    found = decode_record(payload[span[1] : span[2]], header)
    assert found.offset == span[0]
    return found


def expected(batch: bytes, offset: int) -> Record | None:
    return next((r for r in iter_records(batch) if r.offset >= offset), None)


@settings(max_examples=60, deadline=None)
@given(
    records=records,
    codec=st.sampled_from(list(Compression)),
    base=st.integers(0, 2**40),
    append_time=st.booleans(),
)
def test_every_offset_of_a_produced_batch(
    records: list[NewRecord], codec: Compression, base: int, append_time: bool
) -> None:
    batch = build_batch(records, compression=codec, base_offset=base, log_append_time=append_time)
    for offset in range(base - 2, base + len(records) + 2):
        assert first_at_or_after(batch, offset) == expected(batch, offset)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), records=records, base=st.integers(0, 2**40))
def test_every_offset_of_a_compacted_batch(data: st.DataObject, records: list[NewRecord], base: int) -> None:
    gaps = data.draw(st.lists(st.integers(1, 5), min_size=len(records), max_size=len(records)))
    deltas = [sum(gaps[: i + 1]) - 1 for i in range(len(records))]
    last = deltas[-1] + data.draw(st.integers(0, 3))
    batch = build_batch(records, base_offset=base, offset_deltas=deltas, last_offset_delta=last)
    for offset in range(base - 1, base + last + 2):
        assert first_at_or_after(batch, offset) == expected(batch, offset)


def test_a_batch_that_claims_one_record_per_offset_but_skips_is_walked() -> None:
    """recordCount == lastOffsetDelta + 1 with deltas 0, 2, 3: skipping by count would
    land on offset 2 for offset 1; the check sends it to the walk, which finds the same
    record as a full decode."""
    rs = [NewRecord(b"v%d" % i, b"k", timestamp=1) for i in range(3)]
    batch = build_batch(rs, offset_deltas=[0, 2, 3], last_offset_delta=2)
    for offset in range(4):
        assert first_at_or_after(batch, offset) == expected(batch, offset)


@settings(max_examples=60, deadline=None)
@given(records=records, codec=st.sampled_from(list(Compression)), append_time=st.booleans())
def test_timestamp_bounds_agree_with_a_full_decode(
    records: list[NewRecord], codec: Compression, append_time: bool
) -> None:
    batch = build_batch(records, compression=codec, log_append_time=append_time)
    header = read_header(batch)
    stamps = [r.timestamp for r in iter_records(batch)]
    assert timestamp_bounds(batch_payload(batch, header), header) == (min(stamps), max(stamps))
