"""iter_keys gives exactly the (offset, key, tombstone) that a full decode gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from logtrove.records import Compression, NewRecord, build_batch, iter_keys, iter_records

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


@settings(max_examples=60, deadline=None)
@given(records=records, codec=st.sampled_from(list(Compression)), base=st.integers(0, 2**40))
def test_iter_keys_agrees_with_a_full_decode(records: list[NewRecord], codec: Compression, base: int) -> None:
    batch = build_batch(records, compression=codec, base_offset=base)
    expected = [(r.offset, r.key, r.value is None) for r in iter_records(batch)]
    assert list(iter_keys(batch)) == expected
