"""Lag from a data directory (no broker): commits, never-committed partitions, time lag
under a fake clock, tag subscriptions, and the tag consumer bringing lag to 0."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tests.lag.helpers import TOPIC, MixedTopic, write_mixed_topic

from logtrove.groups import OFFSETS_TOPIC, OffsetStore
from logtrove.groups.consumer import StartAt, StoreCommitter, TagConsumer
from logtrove.groups.lag import LagMonitor
from logtrove.groups.progress import GroupProgress
from logtrove.groups.subscriptions import (
    SubscriptionKey,
    append_subscription,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from logtrove.groups.tags import InvalidTagExpressionError, TagFilter
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage, UnknownTopicError
from logtrove.testing import FakeClock


@pytest.fixture
def mixed(tmp_path: Path) -> MixedTopic:
    return write_mixed_topic(tmp_path / "data", partitions=2, batches_per_partition=12)


def test_subscription_records_round_trip_and_are_skipped_by_the_offset_store(tmp_path: Path) -> None:
    key = SubscriptionKey("g", "orders")
    assert decode_key(encode_key(key)) == key
    sub = decode_value(key, encode_value("TagA || TagB", 5))
    assert (sub.expression, sub.updated_ms, sub.filter.tags) == ("TagA || TagB", 5, (b"TagA", b"TagB"))
    with Storage.open(tmp_path / "d") as storage:
        storage.create_topic("orders", 1)
        append_subscription(storage, "g", "orders", "TagB||TagA")
        with pytest.raises(InvalidTagExpressionError):
            append_subscription(storage, "g", "orders", "TagA ||")
        with pytest.raises(UnknownTopicError):
            append_subscription(storage, "g", "nope", "TagA")
        store = OffsetStore(storage)
        assert store.load() == 0, "a subscription is not an offset commit"
    with Storage.open(tmp_path / "d", read_only=True) as storage:
        progress = GroupProgress(storage)
        progress.refresh()
        got = progress.subscription("g", "orders")
        assert got is not None and got.expression == "TagB || TagA"
        assert progress.groups() == ["g"] and progress.topics_of("g") == ["orders"]
    with Storage.open(tmp_path / "d") as storage:
        append_subscription(storage, "g", "orders", None)  # unsubscribe: a tombstone
    with Storage.open(tmp_path / "d", read_only=True) as storage:
        progress = GroupProgress(storage)
        progress.refresh()
        assert progress.subscription("g", "orders") is None


def test_lag_is_end_minus_committed_and_never_committed_is_not_zero(mixed: MixedTopic) -> None:
    clock = FakeClock()
    with Storage.open(mixed.path, clock=clock) as storage:
        committer = StoreCommitter(storage)
        reader = Storage.open(mixed.path, read_only=True)
        monitor = LagMonitor(reader, clock=clock)
        end0 = storage.log(TOPIC, 0).log_end_offset
        end1 = storage.log(TOPIC, 1).log_end_offset
        for committed in (0, 1, 777, end0 // 2, end0):
            committer.commit("g", TOPIC, {0: committed})
            monitor.refresh()
            (group,) = monitor.lag("g")
            p0, p1 = group.partitions()
            assert (p0.committed_offset, p0.lag, p0.log_end_offset) == (committed, end0 - committed, end0)
            assert p1.never_committed and p1.lag is None and p1.time_lag_ms is None
            assert p1.log_end_offset == end1
            assert group.lag == end0 - committed and group.never_committed == 1
            assert group.topics[0].to_json()["never_committed_partitions"] == 1
        reader.close()


def test_time_lag_grows_with_the_clock_and_falls_with_commits(mixed: MixedTopic) -> None:
    clock = FakeClock()
    with Storage.open(mixed.path, clock=clock) as storage:
        log = storage.log(TOPIC, 0)
        timestamps = [r.timestamp for r in log.records()]
        committer = StoreCommitter(storage)
        monitor = LagMonitor(storage, clock=clock)
        clock.set(max(timestamps) + 60_000)
        committer.commit("g", TOPIC, {0: 100})
        monitor.refresh()
        first = monitor.group_lag("g").partitions()[0].time_lag_ms
        assert first == clock.now_ms() - timestamps[100]
        clock.advance(5_000)
        assert monitor.group_lag("g").partitions()[0].time_lag_ms == first + 5_000, "grows with time"
        later = max(range(100, len(timestamps)), key=lambda o: timestamps[o])
        committer.commit("g", TOPIC, {0: later})
        monitor.refresh()
        dropped = monitor.group_lag("g").partitions()[0].time_lag_ms
        assert (
            dropped == clock.now_ms() - timestamps[later] and dropped is not None and dropped < first + 5_000
        )
        committer.commit("g", TOPIC, {0: log.log_end_offset})
        monitor.refresh()
        row = monitor.group_lag("g").partitions()[0]
        assert (row.lag, row.time_lag_ms) == (0, 0), "caught up: no time lag"


def test_tag_lag_is_exact_and_raw_lag_stays_kafka_style(mixed: MixedTopic) -> None:
    rng = random.Random(9)
    with Storage.open(mixed.path) as storage:
        append_subscription(storage, "billing", TOPIC, "TagA")
        committer = StoreCommitter(storage)
        monitor = LagMonitor(storage)
        wanted = TagFilter.parse("TagA")
        for _ in range(6):
            commits = {p: rng.randrange(len(mixed.tags[p]) + 1) for p in (0, 1)}
            committer.commit("billing", TOPIC, commits)
            monitor.refresh()
            (group,) = monitor.lag("billing", TOPIC)
            for row in group.partitions():
                c = commits[row.partition]
                assert row.tags == "TagA"
                assert row.lag == row.log_end_offset - c
                assert row.tag_lag == mixed.count(row.partition, wanted, c)
            assert group.tag_lag == sum(mixed.count(p, wanted, commits[p]) for p in (0, 1))


def test_tag_consumer_gets_every_match_and_lag_reaches_zero(mixed: MixedTopic) -> None:
    with Storage.open(mixed.path) as storage:
        append_subscription(storage, "billing", TOPIC, "TagB")
        committer = StoreCommitter(storage)
        consumer = TagConsumer(storage, TOPIC, "TagB", group="billing", committer=committer)
        got: dict[int, list[int]] = {0: [], 1: []}
        while batch := consumer.poll(200):
            for c in batch:
                assert c.record.header("tag") == b"TagB"
                got[c.partition].append(c.record.offset)
            consumer.commit()
        consumer.commit()
        for p in (0, 1):
            assert got[p] == [o for o, t in enumerate(mixed.tags[p]) if t == b"TagB"], "all of them, in order"
        (group,) = LagMonitor(storage).lag("billing")
        assert [(r.lag, r.tag_lag, r.time_lag_ms) for r in group.partitions()] == [(0, 0, 0), (0, 0, 0)]
        assert storage.has_topic(OFFSETS_TOPIC)
        # a second consumer of the group resumes from the commits: nothing left
        again = TagConsumer(storage, TOPIC, "TagB", group="billing", committer=StoreCommitter(storage))
        assert again.poll() == [] and again.at_end()


def test_tag_consumer_start_positions(mixed: MixedTopic) -> None:
    with Storage.open(mixed.path, read_only=True) as storage:
        log = storage.log(TOPIC, 0)
        latest = TagConsumer(storage, TOPIC, "*", start=StartAt("latest"), partitions=[0])
        assert latest.positions == {0: log.log_end_offset} and latest.poll() == []
        at = TagConsumer(storage, TOPIC, "TagA", start=StartAt(offset=500), partitions=[0])
        first = at.poll(1)[0].record
        assert first.offset == next(o for o in range(500, 10**9) if mixed.tags[0][o] == b"TagA")
        ts = [r.timestamp for r in log.records()]
        by_time = TagConsumer(storage, TOPIC, "*", start=StartAt(timestamp=ts[1234]), partitions=[0])
        assert by_time.poll(1)[0].record.offset == min(o for o, t in enumerate(ts) if t >= ts[1234])
        with pytest.raises(ValueError, match="committer"):
            TagConsumer(storage, TOPIC, "*", group="g")


def test_a_long_unindexed_stretch_without_matches_does_not_end_consumption(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "d") as storage:
        storage.create_topic("t", 1)
        log = storage.log("t", 0)
        for _ in range(10):
            log.append(build_batch([NewRecord(b"x", None, (("tag", b"Other"),), 0) for _ in range(100)]))
        log.append(build_batch([NewRecord(b"wanted", None, (("tag", b"Mine"),), 0)]))
        consumer = TagConsumer(storage, "t", "Mine", max_scan_records=50)
        got = consumer.poll()
        assert [c.record.value for c in got] == [b"wanted"]
        assert consumer.poll() == [] and consumer.at_end()
