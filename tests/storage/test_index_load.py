"""Loading an offset index: a whole, ordered file is read in bulk, anything else entry by
entry; both give the same entries, and a damaged file is refused (writers) or cut at its
first bad entry (read-only openings) as before."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from logtrove.storage.errors import CorruptIndexError
from logtrove.storage.index import OffsetIndex

BASE = 1000


def write(path: Path, entries: list[tuple[int, int]], tail: bytes = b"") -> OffsetIndex:
    path.write_bytes(b"".join(struct.pack(">II", rel, pos) for rel, pos in entries) + tail)
    return OffsetIndex(path, BASE)


def loaded(index: OffsetIndex, log_size: int, *, strict: bool) -> list[tuple[int, int]]:
    index.load(log_size, strict=strict)
    return index.entries()


GOOD = [(0, 0), (5, 100), (9, 250), (40, 4000)]


def test_an_ordered_file_loads_whole(tmp_path: Path) -> None:
    index = write(tmp_path / "a.index", GOOD)
    assert loaded(index, 5000, strict=True) == [(BASE + r, p) for r, p in GOOD]
    assert index.lookup(BASE + 20) == (BASE + 9, 250)
    assert loaded(write(tmp_path / "b.index", []), 0, strict=True) == []


@pytest.mark.parametrize(
    ("entries", "tail", "log_size", "kept"),
    [
        ([(0, 0), (5, 100), (5, 250), (40, 4000)], b"", 5000, 2),  # offsets do not rise
        ([(0, 0), (5, 100), (9, 90), (40, 4000)], b"", 5000, 2),  # positions do not rise
        (GOOD, b"", 3000, 3),  # the last entry is past the log
        (GOOD, b"\x00\x01", 5000, 4),  # a partial entry
    ],
    ids=["offsets", "positions", "past-log", "partial"],
)
def test_a_damaged_file_is_refused_or_cut_at_its_first_bad_entry(
    tmp_path: Path, entries: list[tuple[int, int]], tail: bytes, log_size: int, kept: int
) -> None:
    with pytest.raises(CorruptIndexError):
        write(tmp_path / "s.index", entries, tail).load(log_size, strict=True)
    index = write(tmp_path / "r.index", entries, tail)
    assert loaded(index, log_size, strict=False) == [(BASE + r, p) for r, p in entries[:kept]]


def test_a_missing_file_is_refused_or_empty(tmp_path: Path) -> None:
    with pytest.raises(CorruptIndexError):
        OffsetIndex(tmp_path / "none.index", BASE).load(10, strict=True)
    assert loaded(OffsetIndex(tmp_path / "none.index", BASE), 10, strict=False) == []
