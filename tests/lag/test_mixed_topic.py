"""A mixed-tag topic (1 M records under the slow mark, 40 k by default), built with
storage appends of prebuilt batches: a group subscribed to one tag consumes all of its
records and none of the others, its tag lag equals a brute-force count at several
points on the way, and its raw lag stays Kafka's end − committed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tests.lag.helpers import TOPIC, write_mixed_topic

from logtrove.groups.consumer import StoreCommitter, TagConsumer
from logtrove.groups.lag import LagMonitor
from logtrove.groups.subscriptions import append_subscription
from logtrove.groups.tags import TagFilter
from logtrove.storage import Storage
from logtrove.storage.derived.indexer import Indexer

GROUP = "tag-a-only"


def _run(path: Path, batches_per_partition: int) -> None:
    topic = write_mixed_topic(
        path,
        partitions=2,
        batches_per_partition=batches_per_partition,
        per_batch=250,
        segment_bytes=8 * 1024 * 1024,
        index=False,
    )
    wanted = TagFilter.parse("TagA")
    rng = random.Random(11)
    with Storage.open(path) as storage:
        Indexer(storage).catch_up()
        total = sum(storage.log(TOPIC, p).log_end_offset for p in (0, 1))
        assert total == 2 * batches_per_partition * 250
        # what was written is what the log holds (one full decode, the brute force's base)
        for p in (0, 1):
            assert [r.header("tag") for r in storage.log(TOPIC, p).records()] == topic.tags[p]
        append_subscription(storage, GROUP, TOPIC, "TagA")
        committer = StoreCommitter(storage)
        consumer = TagConsumer(storage, TOPIC, wanted, group=GROUP, committer=committer)
        monitor = LagMonitor(storage)
        consumed: dict[int, list[int]] = {0: [], 1: []}
        checks = polls = 0
        while batch := consumer.poll(rng.randrange(1, 2_000)):
            for c in batch:
                consumed[c.partition].append(c.record.offset)
            consumer.commit()
            polls += 1
            if polls % 2 == 1:
                monitor.refresh()
                for row in monitor.group_lag(GROUP).partitions():
                    c = consumer.positions[row.partition]
                    if row.never_committed:
                        assert c == 0, "not moved yet: not committed either"
                        continue
                    assert row.committed_offset == c
                    assert row.lag == row.log_end_offset - c, "the raw lag is Kafka's number"
                    assert row.tag_lag == topic.count(row.partition, wanted, c), "exact tag lag"
                checks += 1
        assert checks >= 3
        for p in (0, 1):
            want = [o for o, t in enumerate(topic.tags[p]) if t == b"TagA"]
            assert consumed[p] == want, "all of TagA, in order, and nothing else"
        monitor.refresh()
        (group,) = monitor.lag(GROUP)
        assert (group.lag, group.tag_lag) == (0, 0)


def test_mixed_topic_small(tmp_path: Path) -> None:
    _run(tmp_path / "data", 80)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_mixed_topic_one_million_records(tmp_path: Path) -> None:
    _run(tmp_path / "data", 2000)
