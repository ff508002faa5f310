"""Helpers for storage tests: batches with known content, decoding, snapshots of a log's
files, opening a data directory with one test topic, and where storage tests write
(``RAM_DIR``; the ``tmp_path`` fixture in ``conftest.py`` uses it)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

from hypothesis import strategies as st

from logtrove.records import (
    Compression,
    NewRecord,
    Record,
    build_batch,
    iter_records,
    peek_batch_size,
    validate_batch,
)
from logtrove.storage import PartitionLog, Storage
from logtrove.testing import FakeClock

TOPIC = "t"

# Storage tests write real files, in tmpfs when there is one: fsync is what makes them slow on
# a shared disk, and nothing they check depends on it (a killed process leaves its writes in
# the page cache either way). LOGTROVE_TEST_ON_DISK=1 runs them under pytest's tmp_path.
RAM_DIR = "/dev/shm" if Path("/dev/shm").is_dir() and not os.environ.get("LOGTROVE_TEST_ON_DISK") else None


def random_records(rng: random.Random, count: int, now: int, *, max_value: int = 200) -> list[NewRecord]:
    """``count`` records with random keys, values, headers and out-of-order timestamps."""
    out = []
    for _ in range(count):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 12))
        value = None if rng.random() < 0.05 else rng.randbytes(rng.randint(0, max_value))
        headers = (("h", rng.randbytes(3)),) if rng.random() < 0.3 else ()
        out.append(NewRecord(value, key, headers, now + rng.randint(-10_000, 10_000)))
    return out


def batch_of(records: list[NewRecord], compression: Compression = Compression.NONE) -> bytes:
    return build_batch(records, compression=compression)


def decode_batches(data: bytes) -> Iterator[tuple[int, int, list[Record]]]:
    """(base offset, last offset, records) of each batch in ``data``, which must hold whole,
    valid batches and nothing else."""
    pos = 0
    while pos < len(data):
        size = peek_batch_size(data, pos)
        assert size is not None and pos + size <= len(data), f"partial batch at byte {pos}"
        header = validate_batch(data[pos : pos + size])
        yield header.base_offset, header.last_offset, list(iter_records(data, pos, header))
        pos += size


def as_tuple(record: Record) -> tuple[int, int, bytes | None, bytes | None, tuple[object, ...]]:
    return (record.offset, record.timestamp, record.key, record.value, tuple(record.headers))


def expected_tuples(records: list[NewRecord], base_offset: int) -> list[tuple[object, ...]]:
    return [(base_offset + i, r.timestamp, r.key, r.value, tuple(r.headers)) for i, r in enumerate(records)]


def files_of(directory: Path) -> dict[str, bytes]:
    """Name → content of every file in a partition directory."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def open_topic(
    path: Path, clock: FakeClock | None = None, partitions: int = 1, **configs: str
) -> tuple[Storage, PartitionLog]:
    """Open (creating if needed) a data dir with topic ``t``; configs use ``_`` for ``.``."""
    storage = Storage.open(path, clock=clock or FakeClock())
    if not storage.has_topic(TOPIC):
        storage.create_topic(TOPIC, partitions, {k.replace("_", "."): v for k, v in configs.items()})
    return storage, storage.log(TOPIC, 0)


def answer(fn: object, *args: object) -> object:
    """What ``fn(*args)`` returns, or the ``ValueError`` it raised as ``("ValueError",
    message)``: twins must agree on both."""
    try:
        return fn(*args)  # type: ignore[operator]
    except ValueError as e:
        return ("ValueError", str(e))


digest_lists = st.lists(
    st.one_of(
        st.integers(0, 2**64 - 1),  # anywhere
        st.integers(0, 7).map(lambda s: (s << 32) | 0xABC),  # few slots, equal low bits
        st.sampled_from([0, 2**64 - 1, 0x1_0000_0001]),
    ),
    min_size=0,
    max_size=300,
)
"""Hash digests for ``.keyidx`` tables: many sharing a slot, some equal."""
