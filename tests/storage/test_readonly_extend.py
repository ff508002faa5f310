"""A read-only view following a writer extends its grown active segment in place
(:meth:`Segment.extend_read_only`) and must still see exactly what a fresh read-only
opening of the same files sees, through appends, a torn append in progress, rolls,
cleaner swaps and truncations (compared by brute force: every segment's offsets and
indexes, a read from every offset, time lookups, all records)."""

from __future__ import annotations

import bisect
import random
import struct
import threading
from pathlib import Path

import pytest

from logtrove.records import NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.storage.cleaner import Cleaner
from logtrove.storage.truncate import truncate_partition
from logtrove.testing import FakeClock

from .helpers import TOPIC, open_topic

NOW = 1_700_000_000_000


def keyed_batch(rng: random.Random, count: int) -> bytes:
    records = [
        NewRecord(
            rng.randbytes(rng.randint(0, 60)),
            b"k%d" % rng.randint(0, 9),
            (),
            NOW + rng.randint(-5_000, 5_000),
        )
        for _ in range(count)
    ]
    return build_batch(records)


def state(log: PartitionLog, start: int) -> object:
    """Everything a reader can learn from the view from ``start`` on, by brute force."""
    segments = [
        (
            s.base_offset,
            s.inode,
            s.size,
            s.next_offset,
            s.max_timestamp,
            s.max_timestamp_offset,
            s.first_batch_timestamp,
            s.offset_index.entries(),
            s.time_index.entries(),
        )
        for s in log.segments
    ]
    end = log.log_end_offset
    reads = [(log.read(o, 300).first_offset, log.read(o, 300).data()) for o in range(start, end + 1)]
    times = [s.find_timestamp(NOW + t, start) for s in log.segments for t in range(-6_000, 6_001, 500)]
    records = [(r.offset, r.timestamp, r.key, r.value) for r in log.records(start)]
    return segments, end, reads, times, records


def assert_view_exact(path: Path, view: Storage) -> None:
    view.refresh()
    fresh = Storage.open(path, read_only=True)
    try:
        seen, opened = view.log(TOPIC, 0), fresh.log(TOPIC, 0)
        # A view's log start never goes back, also when a truncation below a cleaned
        # segment's base takes the writer's back (as before in-place extension): the two
        # are compared from the larger.
        start = max(seen.log_start_offset, opened.log_start_offset)
        assert state(seen, start) == state(opened, start)
    finally:
        fresh.close()


def torn_prefix(batch: bytes, base_offset: int, cut: int) -> bytes:
    """The first ``cut`` bytes of ``batch`` as the writer writes it at ``base_offset``."""
    return struct.pack(">q", base_offset) + batch[8:cut]


def test_view_follows_appends_torn_appends_rolls_cleaning_and_truncation(tmp_path: Path) -> None:
    rng = random.Random(20)
    clock = FakeClock()
    storage, log = open_topic(
        tmp_path, clock, segment_bytes="4096", index_interval_bytes="200", cleanup_policy="compact"
    )
    view = Storage.open(tmp_path, read_only=True)
    cleaner = Cleaner(storage, map_budget_bytes=24 * 64)
    for _step in range(120):
        action = rng.random()
        if action < 0.08 and log.log_end_offset > 5:
            truncate_partition(storage, TOPIC, 0, rng.randint(log.log_start_offset, log.log_end_offset - 1))
        elif action < 0.14:
            log.roll()
            cleaner.clean(log)
        elif action < 0.22:
            batch = keyed_batch(rng, rng.randint(1, 5))
            cut = rng.choice([5, 40, len(batch) // 2, len(batch) - 1])
            with log.active.log_path.open("ab") as f:  # a write in flight in the writer
                f.write(torn_prefix(batch, log.log_end_offset, cut))
            assert_view_exact(tmp_path, view)
            log.append(batch)  # the writer's write lands over the same bytes
        else:
            for _ in range(rng.randint(1, 6)):
                log.append(keyed_batch(rng, rng.randint(1, 5)))
        if rng.random() < 0.5:
            log.flush()  # index entries reach the files (else they wait in the writer)
        assert_view_exact(tmp_path, view)
    view.close()
    storage.close()


@pytest.mark.parametrize("interval", ["100", "1000000"])  # the index is rewritten / never written
def test_truncated_and_rewritten_past_the_old_end_is_reopened_exactly(tmp_path: Path, interval: str) -> None:
    rng = random.Random(3)
    storage, log = open_topic(tmp_path, FakeClock(), index_interval_bytes=interval)
    for _ in range(10):
        log.append(keyed_batch(rng, 3))
    view = Storage.open(tmp_path, read_only=True)
    view.refresh()
    truncate_partition(storage, TOPIC, 0, 4)  # in place: same inode, shorter
    for _ in range(14):  # and longer than before
        log.append(keyed_batch(rng, 3))
    log.flush()
    assert_view_exact(tmp_path, view)
    view.close()
    storage.close()


def test_growth_refresh_extends_the_segment_object_in_place(tmp_path: Path) -> None:
    rng = random.Random(7)
    storage, log = open_topic(tmp_path, FakeClock(), index_interval_bytes="100")
    log.append(keyed_batch(rng, 2))
    view = Storage.open(tmp_path, read_only=True)
    view_log = view.log(TOPIC, 0)
    active = view_log.segments[-1]
    for round_ in range(6):
        for _ in range(4):
            log.append(keyed_batch(rng, 2))
        if round_ % 2:  # else the index entries of these batches reach the files later
            log.flush()
        assert_view_exact(tmp_path, view)
        assert view_log.segments[-1] is active
    assert view_log.log_end_offset == log.log_end_offset == 50
    assert len(active.offset_index) > 0  # the entries the writer wrote were picked up
    log.roll()
    log.append(keyed_batch(rng, 2))
    assert_view_exact(tmp_path, view)
    assert view_log.segments[0] is active  # the sealed segment stays the same object
    view.close()
    storage.close()


def test_batch_recovery_cut_and_the_writer_wrote_over_is_reopened_exactly(tmp_path: Path) -> None:
    """A view walks batch headers only, so it takes in a whole batch with a bad CRC; a
    writer restarting after a crash cuts it in place (same file) and appends past it."""
    rng = random.Random(5)
    storage, log = open_topic(tmp_path, FakeClock(), index_interval_bytes="1000000")
    for _ in range(5):
        log.append(keyed_batch(rng, 3))
    end = log.log_end_offset
    bad = bytearray(torn_prefix(keyed_batch(rng, 3), end, 10**6))
    bad[-1] ^= 0xFF
    with log.active.log_path.open("ab") as f:
        f.write(bad)
    view = Storage.open(tmp_path, read_only=True)
    view.refresh()
    assert view.log(TOPIC, 0).log_end_offset == end + 3
    storage.abandon()
    storage, log = open_topic(tmp_path, FakeClock())  # recovery cuts the bad batch
    assert log.log_end_offset == end
    for _ in range(6):
        log.append(keyed_batch(rng, 3))
    log.flush()
    assert_view_exact(tmp_path, view)
    view.close()
    storage.close()


def test_a_thread_reading_the_view_while_it_extends_sees_whole_written_batches(tmp_path: Path) -> None:
    rng = random.Random(11)
    storage, log = open_topic(tmp_path, FakeClock(), index_interval_bytes="150")
    written: dict[int, bytes] = {}  # base offset -> the batch as written, leader epoch 0
    bases: list[int] = []

    def append() -> None:
        batch = keyed_batch(rng, rng.randint(1, 4))
        base = log.log_end_offset
        log.append(batch)
        written[base] = struct.pack(">q", base) + batch[8:12] + bytes(4) + batch[16:]
        bases.append(base)

    append()
    view = Storage.open(tmp_path, read_only=True)
    seen = view.log(TOPIC, 0)
    stop = threading.Event()
    failures: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        pick = random.Random(1)
        while not stop.is_set() and not failures:
            end = seen.log_end_offset  # before the batches: they reach at least this far
            offset = pick.randrange(end)
            base = bases[bisect.bisect_right(bases, offset) - 1]
            data = bytearray(seen.read(offset, 1).data())
            data[12:16] = bytes(4)  # the partition leader epoch the writer stamps
            if data[: len(written[base])] != written[base]:
                failures.append(f"read at {offset} below end {end} did not start with batch {base}")
            reads += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(300):
            for _ in range(rng.randint(1, 3)):
                append()
            if rng.random() < 0.5:
                log.flush()
            view.refresh()
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failures, failures[0]
    assert reads > 0 and seen.log_end_offset == log.log_end_offset
    view.close()
    storage.close()
