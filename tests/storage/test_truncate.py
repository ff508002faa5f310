"""A follower's truncation of its log end (``storage.truncate``) and the leader epochs read
from batch headers (``storage.epochs``): whole batches are dropped from the cut on, the
derived indexes follow (a key query finds the records written at the same offsets since,
never the dropped ones), a reopen sees the same log, and OffsetForLeaderEpoch answers
as Kafka's leader-epoch cache does."""

from __future__ import annotations

from pathlib import Path

import pytest

from logtrove.query import KeyQuery, QueryEngine
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.cleaner import Cleaner
from logtrove.storage.derived.indexer import Indexer
from logtrove.storage.epochs import end_offset_for, epoch_entries, latest_epoch
from logtrove.storage.truncate import truncate_partition
from logtrove.testing import FakeClock

T = "f"


def _batch(base: int, n: int, prefix: str, epoch: int) -> bytes:
    records = [
        NewRecord(key=f"{prefix}{base + i}".encode(), value=b"v" * 50, timestamp=1_000 + base + i)
        for i in range(n)
    ]
    return build_batch(records, base_offset=base, partition_leader_epoch=epoch)


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    s = Storage.open(tmp_path / "data", clock=FakeClock())
    s.create_topic(T, 1, {"segment.bytes": "2000"}, followed_from="leader:9092")
    return s


def _fill(storage: Storage) -> None:
    """Offsets 0-99 in batches of 5: epoch 0 below 40, epoch 3 from 40 on; several segments."""
    log = storage.log(T, 0)
    for base in range(0, 100, 5):
        log.append_replicated(_batch(base, 5, "old", 0 if base < 40 else 3))
    assert len(log.segments) > 3


def _keys(storage: Storage, key: str) -> list[int]:
    reader = Storage.open(storage.path, read_only=True)
    try:
        messages, _ = QueryEngine(reader).run(KeyQuery(T, key.encode())).all()
        return [m.offset for m in messages]
    finally:
        reader.close()


def test_truncation_drops_whole_batches_and_the_indexes_follow(storage: Storage) -> None:
    _fill(storage)
    indexer = Indexer(storage, block_records=4)
    indexer.catch_up()
    log = storage.log(T, 0)
    assert _keys(storage, "old62") == [62]
    before = [(s.base_offset, s.next_offset) for s in log.segments]
    end = truncate_partition(storage, T, 0, 62)  # inside the batch 60-64: it goes whole
    assert end == 60 == log.log_end_offset
    assert [r.offset for r in log.records()] == list(range(60))
    assert all(s.next_offset <= 60 for s in log.segments[:-1]) and log.active.size == 0
    assert [s for s in before if s[0] >= 60] and not [s for s in log.segments if s.base_offset > 60]
    for base in range(60, 90, 5):  # the new leader's records at the same offsets
        log.append_replicated(_batch(base, 5, "new", 4))
    indexer.catch_up()
    assert _keys(storage, "old62") == []
    assert _keys(storage, "new62") == [62]
    assert _keys(storage, "old12") == [12]
    assert epoch_entries(log) == [(0, 0), (3, 40), (4, 60)]
    storage.close()
    again = Storage.open(storage.path)
    try:
        reopened = again.log(T, 0)
        assert reopened.log_end_offset == 90
        keys = [r.key for r in reopened.records()]
        assert keys == [b"old%d" % i for i in range(60)] + [b"new%d" % i for i in range(60, 90)]
    finally:
        again.close()


def test_truncation_at_a_segment_boundary_and_below_the_log_start(storage: Storage) -> None:
    _fill(storage)
    log = storage.log(T, 0)
    second = log.segments[1].base_offset
    assert truncate_partition(storage, T, 0, second) == second
    assert log.log_end_offset == second and log.segments[-1].base_offset == second
    assert truncate_partition(storage, T, 0, 3) == 0  # the batch 0-4 holds offset 3
    assert log.log_end_offset == 0 and log.log_start_offset == 0
    log.append_replicated(_batch(0, 5, "again", 1) + _batch(5, 5, "again", 1))
    assert [r.key for r in log.records()][:1] == [b"again0"]
    assert truncate_partition(storage, T, 0, 50) == 10  # past the end: nothing to do
    storage.follow_log_start(T, 0, 7)
    assert truncate_partition(storage, T, 0, 2) == 2  # below the log start: restart there
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)
    log.append_replicated(_batch(2, 3, "third", 2))
    assert [r.offset for r in log.records()] == [2, 3, 4]


def test_the_epoch_cache_walks_again_after_a_truncation(storage: Storage) -> None:
    _fill(storage)
    log = storage.log(T, 0)
    assert latest_epoch(log) == 3
    truncate_partition(storage, T, 0, 40)
    assert epoch_entries(log) == [(0, 0)]
    log.append_replicated(_batch(40, 5, "n", 5))
    assert epoch_entries(log) == [(0, 0), (5, 40)]


@pytest.mark.parametrize(
    ("requested", "current", "expected"),
    [
        (0, None, (0, 40)),  # an older epoch ends where the next one starts
        (2, None, (0, 40)),  # unknown between two: the floor epoch, and the next's start
        (3, None, (3, 100)),  # the latest: the log end
        (7, None, (-1, -1)),  # newer than any known: undefined
        (5, 6, (3, 100)),  # a promoted leader's own epoch starts at the log end
        (6, 6, (6, 100)),
        (-1, None, (-1, -1)),
    ],
)
def test_end_offset_for_answers_as_kafka(
    requested: int, current: int | None, expected: tuple[int, int]
) -> None:
    assert end_offset_for([(0, 0), (3, 40)], requested, 100, current) == expected


def test_below_every_known_epoch_the_answer_is_the_first_epochs_start() -> None:
    assert end_offset_for([(2, 10), (3, 40)], 1, 100) == (1, 10)
    assert end_offset_for([], 1, 100) == (-1, -1)


def test_records_appended_after_a_truncation_below_the_cleaned_section_are_cleaned(tmp_path: Path) -> None:
    storage = Storage.open(tmp_path / "data", clock=FakeClock())
    storage.create_topic(T, 1, {"segment.bytes": "2000", "cleanup.policy": "compact"}, followed_from="x:1")
    log = storage.log(T, 0)
    for base in range(0, 100, 5):
        log.append_replicated(_batch(base, 5, "old", 0))
    cleaner = Cleaner(storage)
    cleaner.clean(log)
    assert cleaner.first_dirty(log) > 40
    truncate_partition(storage, T, 0, 40)
    assert cleaner.first_dirty(log) == 40  # what comes next was never cleaned
    for base in range(40, 100, 5):  # keys k0-k9 over and over: each written six times
        records = [NewRecord(key=b"k%d" % ((base + i) % 10), value=b"v", timestamp=1_000) for i in range(5)]
        log.append_replicated(build_batch(records, base_offset=base, partition_leader_epoch=1))
    log.roll()
    cleaner.clean(log)
    keys = [r.key for r in log.records(40, log.active.base_offset)]
    assert sorted(keys) == sorted(b"k%d" % i for i in range(10)), "each key once"
