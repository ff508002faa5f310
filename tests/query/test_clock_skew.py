"""By-ID queries when client and broker clocks disagree: the time part of a client ID is
only a hint. IDs made by clients hours ahead of or behind the broker, and an ID whose
time points into a busy stretch of other records, are still found exactly, whatever the
indexer did, after reopening."""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from logtrove.query import IdQuery, MessageIdGenerator, QueryEngine, Reason, id_time
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.derived.indexer import Indexer, PartitionIndexer
from logtrove.testing import FakeClock

from .helpers import Oracle, by_partition, nonempty

TOPIC = "skew"
T0 = 1_763_800_000_000
HOUR = 3_600_000
PARTITIONS = 2


@dataclass
class Skewed:
    path: Path
    ahead: str  # made by a client 5 h ahead of the broker
    behind: str  # made by a client 5 h behind
    busy: str  # its time points into the first busy stretch; written 2 h later
    twice: str  # an ahead ID produced twice, into both partitions
    split: str  # a behind ID produced in each stretch: indexed once, in the tail once
    busy_start: int
    busy_end: int


def write(path: Path) -> Skewed:
    """Two busy stretches of 3 000 records, two hours apart, on a LogAppendTime topic:
    record timestamps are the broker's clock, IDs carry each client's clock."""
    broker = FakeClock(T0)
    rng = random.Random(17)
    honest = MessageIdGenerator(1, clock=broker)
    ahead = MessageIdGenerator(2, clock=FakeClock(T0 + 2 * HOUR + 5 * HOUR))
    behind = MessageIdGenerator(3, clock=FakeClock(T0 + 2 * HOUR - 5 * HOUR))
    busy = MessageIdGenerator(4, clock=FakeClock(T0 + 15_000))
    targets = {"ahead": ahead.next_id(), "behind": behind.next_id(), "busy": busy.next_id()}
    twice = ahead.next_id()
    split = behind.next_id()
    config = {"message.timestamp.type": "LogAppendTime", "segment.bytes": "20000"}
    with Storage.open(path, clock=broker) as storage:
        storage.create_topic(TOPIC, PARTITIONS, config)

        def stretch(inserts: dict[int, list[tuple[int, str]]]) -> None:
            for i in range(3_000):
                broker.advance(10)
                mid = honest.next_id().encode()
                record = NewRecord(b"background %d" % i, b"k%d" % (i % 50), (("id", mid),), broker.now_ms())
                storage.log(TOPIC, rng.randrange(PARTITIONS)).append(build_batch([record]))
                for p, target in inserts.get(i, []):
                    mine = NewRecord(
                        b"target " + target.encode(), b"t", (("id", target.encode()),), id_time(target)
                    )
                    storage.log(TOPIC, p).append(build_batch([mine]))

        stretch({100: [(0, split)]})
        busy_end = broker.now_ms()
        broker.advance(2 * HOUR)
        stretch(
            {
                500: [(0, targets["ahead"])],
                1_200: [(1, targets["behind"])],
                2_000: [(0, targets["busy"])],
                2_500: [(0, twice), (1, twice)],
                2_800: [(1, split)],
            }
        )
    return Skewed(path, targets["ahead"], targets["behind"], targets["busy"], twice, split, T0, busy_end)


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> Skewed:
    return write(tmp_path_factory.mktemp("skew") / "data")


def index(path: Path, state: str) -> None:
    with Storage.open(path) as storage:
        if state == "behind":
            for p in range(PARTITIONS):  # the first stretch indexed, the second not
                PartitionIndexer(storage.log(TOPIC, p), block_records=300).step(1_600)
        elif state == "caught-up":
            Indexer(storage, block_records=300).catch_up()


@pytest.fixture(scope="module", params=["unindexed", "behind", "caught-up"])
def engine(
    request: pytest.FixtureRequest, skewed: Skewed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QueryEngine]:
    dst = tmp_path_factory.mktemp(request.param) / "data"
    shutil.copytree(skewed.path, dst)
    index(dst, request.param)
    with Storage.open(dst, read_only=True) as storage:  # reopened after writing
        yield QueryEngine(storage)


def test_the_ids_time_is_far_from_the_records_timestamps(skewed: Skewed, engine: QueryEngine) -> None:
    oracle = Oracle(engine.storage, TOPIC)
    for mid, skew in ((skewed.ahead, 5 * HOUR), (skewed.behind, -5 * HOUR), (skewed.busy, None)):
        (record,) = [r for _, r in oracle.all() if ("id", mid.encode()) in r.headers]
        hinted = id_time(mid)
        assert hinted is not None
        if skew is None:
            assert skewed.busy_start <= hinted < skewed.busy_end
            assert record.timestamp - hinted > HOUR
        else:
            assert abs(hinted - record.timestamp - skew) < 60_000


@pytest.mark.parametrize("which", ["ahead", "behind", "busy", "twice", "split"])
def test_id_from_a_skewed_client_is_found_exactly(skewed: Skewed, engine: QueryEngine, which: str) -> None:
    mid = getattr(skewed, which)
    oracle = Oracle(engine.storage, TOPIC)
    want = nonempty(oracle.newest_first(lambda r: ("id", mid.encode()) in r.headers))
    assert sum(len(v) for v in want.values()) == (2 if which in ("twice", "split") else 1)
    messages, completion = engine.run(IdQuery(TOPIC, mid)).all()
    assert by_partition(messages) == want
    assert all(m.value == b"target " + mid.encode() for m in messages)
    assert completion.reason == Reason.EXHAUSTED  # nothing in the ID's window: all searched
    exhaustive = engine.run(IdQuery(TOPIC, mid, exhaustive=True)).all()[0]
    assert by_partition(exhaustive) == want
    (newest,) = engine.run(IdQuery(TOPIC, mid, limit=1)).all()[0]
    assert (newest.partition, newest.offset) == (messages[0].partition, messages[0].offset)


def test_honest_ids_in_the_busy_stretch_are_found_in_their_window(engine: QueryEngine) -> None:
    oracle = Oracle(engine.storage, TOPIC)
    sample = [(p, r) for p, r in oracle.all() if r.value and r.value.startswith(b"background")][::997]
    for p, record in sample:
        mid = dict(record.headers)["id"]
        assert mid is not None
        messages, completion = engine.run(IdQuery(TOPIC, mid.decode())).all()
        assert [(m.partition, m.offset) for m in messages] == [(p, record.offset)]
        assert completion.reason == Reason.HINT
