"""Splitting bytes that hold batches back to back into whole batches
(:func:`logtrove.records.whole_batches`): a torn tail is left out, framing that no cut
can produce is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logtrove.records import (
    Compression,
    InvalidLengthError,
    InvalidMagicError,
    NewRecord,
    build_batch,
    read_header,
    whole_batches,
)


@st.composite
def batch_runs(draw: st.DrawFn) -> list[bytes]:
    """Valid batches of one to five records each, at consecutive offsets."""
    out, offset = [], 0
    for _ in range(draw(st.integers(0, 5))):
        values = draw(st.lists(st.binary(max_size=40), min_size=1, max_size=5))
        codec = draw(st.sampled_from([Compression.NONE, Compression.GZIP, Compression.ZSTD]))
        out.append(build_batch([NewRecord(v) for v in values], base_offset=offset, compression=codec))
        offset += len(values)
    return out


@given(batch_runs(), st.data())
def test_a_run_cut_at_any_byte_gives_exactly_the_whole_batches_before_the_cut(
    batches: list[bytes], data: st.DataObject
) -> None:
    run = b"".join(batches)
    cut = data.draw(st.integers(0, len(run)))
    lead = data.draw(st.binary(max_size=3))  # the split may start anywhere in a buffer
    buf = lead + run[:cut]
    split = whole_batches(buf, len(lead))

    ends = [sum(map(len, batches[: i + 1])) for i in range(len(batches))]
    expected = [b for b, end in zip(batches, ends, strict=True) if end <= cut]
    assert [b for _, b in split.slices(buf)] == expected
    assert [h for h, _ in split.batches] == [read_header(b) for b in expected]
    assert split.end == len(lead) + sum(map(len, expected))
    assert split.torn == (cut not in [0, *ends])


def test_no_bytes_split_into_nothing() -> None:
    assert whole_batches(b"") == ([], 0, False)


def test_a_batch_length_smaller_than_a_header_is_refused_not_taken_for_a_torn_tail() -> None:
    one = build_batch([NewRecord(b"a")])
    for length in (-12, -1, 0, 5, 48):
        bad = bytearray(build_batch([NewRecord(b"b")], base_offset=1))
        bad[8:12] = length.to_bytes(4, "big", signed=True)
        with pytest.raises(InvalidLengthError, match=f"at byte {len(one)}"):
            whole_batches(one + bytes(bad))
        with pytest.raises(InvalidLengthError):
            whole_batches(one + bytes(bad[:12]))  # only its length there: already wrong


def test_a_whole_batch_with_another_magic_is_refused() -> None:
    bad = bytearray(build_batch([NewRecord(b"a")]))
    bad[16] = 1
    with pytest.raises(InvalidMagicError):
        whole_batches(bytes(bad))
    assert whole_batches(bytes(bad[:-1])).torn  # not whole yet: a torn tail, fetched again
