"""The Spark map job's building blocks: digests and entries from Arrow buffers (compiled
and pure-Python twins), and joining part files into one sorted map file."""

from __future__ import annotations

import itertools
import random
import struct
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logtrove.storage.cleaner import OffsetMapFile, key_digest
from logtrove.storage.cleaner import offset_map as om

compiled = pytest.mark.skipif(om.NATIVE is None, reason="the compiled passes are not built here")

KEYS = st.lists(st.binary(max_size=40), max_size=60)


def _buffers(array: pa.Array) -> tuple[pa.Buffer, pa.Buffer, bool]:
    _, ends, data = array.buffers()
    return ends, data if data is not None else pa.py_buffer(b""), pa.types.is_large_binary(array.type)


@given(keys=KEYS, large=st.booleans(), cut=st.integers(0, 10))
@settings(max_examples=200, deadline=None)
def test_digest_keys_gives_each_keys_digest_for_sliced_and_large_columns(
    keys: list[bytes], large: bool, cut: int
) -> None:
    array = pa.array(keys, pa.large_binary() if large else pa.binary())[min(cut, len(keys)) :]
    ends, data, is_large = _buffers(array)
    expected = b"".join(key_digest(k) for k in array.to_pylist())
    assert om.py_digest_keys(ends, data, len(array), is_large, array.offset) == expected
    if om.NATIVE is not None:
        assert om.NATIVE.digest_keys(ends, data, len(array), is_large, array.offset) == expected


@given(
    rows=st.lists(
        st.tuples(st.binary(min_size=16, max_size=16), st.integers(-(2**63), 2**63 - 1)), max_size=50
    )
)
@settings(max_examples=200, deadline=None)
def test_map_entries_packs_digest_and_big_endian_offset(rows: list[tuple[bytes, int]]) -> None:
    digests = b"".join(d for d, _ in rows)
    offsets = pa.array([o for _, o in rows], pa.int64()).buffers()[1] or pa.py_buffer(b"")
    expected = b"".join(struct.pack(">16sq", d, o) for d, o in rows)
    assert om.py_map_entries(digests, offsets, len(rows)) == expected
    if om.NATIVE is not None:
        assert om.NATIVE.map_entries(digests, offsets, len(rows)) == expected


@pytest.mark.parametrize("twin", ["python", pytest.param("compiled", marks=compiled)])
def test_short_buffers_are_refused_not_read_past(twin: str) -> None:
    digest, entries = (
        (om.py_digest_keys, om.py_map_entries)
        if twin == "python"
        else (om.NATIVE.digest_keys, om.NATIVE.map_entries)
    )
    ends = struct.pack("=3i", 0, 4, 9)  # row 1 ends past the 8 data bytes
    with pytest.raises(ValueError, match="row 1 has offsets outside the data buffer"):
        digest(ends, b"abcdefgh", 2, False, 0)
    with pytest.raises(ValueError, match="shorter than its rows need"):
        digest(ends, b"abcdefghi", 3, False, 0)
    with pytest.raises(ValueError, match="shorter than its rows need"):
        entries(bytes(32), bytes(8), 2)


def _part(path: Path, pairs: list[tuple[bytes, int]]) -> Path:
    path.write_bytes(b"".join(struct.pack(">16sq", d, o) for d, o in sorted(pairs)))
    return path


def test_parts_in_any_order_join_into_one_sorted_map(tmp_path: Path) -> None:
    rng = random.Random(7)
    latest = {f"key-{i}".encode(): rng.randrange(10_000) for i in range(3_000)}
    pairs = sorted((key_digest(k), o) for k, o in latest.items())
    cuts = [0, 700, 701, 1_900, 3_000]
    files = [_part(tmp_path / f"p{i}", pairs[a:b]) for i, (a, b) in enumerate(itertools.pairwise(cuts))]
    files.append(_part(tmp_path / "empty", []))
    rng.shuffle(files)
    out = tmp_path / "joined.map"
    assert om.join_offset_map_parts(out, files, 10_000) == 3_000
    joined = OffsetMapFile(out)
    try:
        assert joined.end_offset == 10_000
        assert all(joined.latest(k) == o for k, o in latest.items())
        assert joined.latest(b"nobody") is None
    finally:
        joined.close()


def test_overlapping_or_torn_parts_are_refused_and_no_map_is_written(tmp_path: Path) -> None:
    pairs = sorted((key_digest(b"k%d" % i), i) for i in range(100))
    a = _part(tmp_path / "a", pairs[:60])
    b = _part(tmp_path / "b", pairs[50:])
    out = tmp_path / "x.map"
    with pytest.raises(ValueError, match="overlaps"):
        om.join_offset_map_parts(out, [a, b], 100)
    torn = tmp_path / "torn"
    torn.write_bytes(a.read_bytes()[:-5])
    with pytest.raises(ValueError, match="not a whole number of 24-byte entries"):
        om.join_offset_map_parts(out, [torn], 100)
    assert not out.exists()
