"""The segment file pool: bounded descriptors, files in use never closed, reopening by
path only while the path names the same file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logtrove.storage.files import FilePool, SegmentFile


def _files(tmp_path: Path, pool: FilePool, count: int) -> list[SegmentFile]:
    out = []
    for i in range(count):
        path = tmp_path / f"{i}.log"
        path.write_bytes(b"file %d" % i)
        out.append(SegmentFile(pool, path, read_only=True))
    return out


def test_idle_files_beyond_the_capacity_are_closed_and_reopen_on_the_next_read(tmp_path: Path) -> None:
    pool = FilePool(capacity=2, keep_limit=0)
    files = _files(tmp_path, pool, 5)
    for _ in range(3):
        for i, f in enumerate(files):
            assert f.pread(100, 0) == b"file %d" % i
            assert pool.open_count <= 2
    assert [f.fd is not None for f in files] == [False, False, False, True, True]


def test_a_file_in_use_is_not_closed_by_eviction_or_close(tmp_path: Path) -> None:
    pool = FilePool(capacity=1, keep_limit=0)
    first, *others = _files(tmp_path, pool, 4)
    with first.pinned() as fd:
        for f in others:
            f.pread(10, 0)
        first.close()
        assert os.pread(fd, 10, 0) == b"file 0"  # still its own file
    assert first.fd is None
    with pytest.raises(OSError, match="closed"):
        first.pread(10, 0)


def test_kept_files_stay_open_up_to_the_keep_limit(tmp_path: Path) -> None:
    pool = FilePool(capacity=1, keep_limit=2)
    files = _files(tmp_path, pool, 4)
    for f in files:
        f.keep()
    assert [f.kept for f in files] == [True, True, False, False]
    for f in files:
        f.pread(1, 0)
    assert all(f.fd is not None for f in files[:2])
    files[0].unkeep()
    files[2].keep()
    assert files[2].kept and pool.open_count <= 2 + 1


def test_a_reader_whose_file_was_replaced_gets_file_not_found_not_other_bytes(tmp_path: Path) -> None:
    pool = FilePool(capacity=1, keep_limit=0)
    old, other = _files(tmp_path, pool, 2)
    assert old.pread(10, 0) == b"file 0"
    other.pread(10, 0)  # evicts ``old``
    replacement = tmp_path / "new.log"
    replacement.write_bytes(b"cleaned")
    replacement.replace(old.path)  # as a cleaner swap does
    with pytest.raises(FileNotFoundError, match="replaced"):
        old.pread(10, 0)
