"""The equivalence tests at the issue's scale: one million random messages, with the
indexer behind and caught up, read through a read-only opening (as while a broker runs).
Slow (a few minutes): ``make test-slow``."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from logtrove.query import (
    Contains,
    ContentQuery,
    HeaderQuery,
    IdQuery,
    JsonField,
    KeyQuery,
    QueryEngine,
    RangeQuery,
    Reason,
    TimeQuery,
)
from logtrove.storage import Storage
from logtrove.storage.derived.indexer import Indexer, PartitionIndexer

from .helpers import TOPIC, Oracle, by_partition, nonempty, write_dataset

pytestmark = pytest.mark.slow


@pytest.mark.timeout(3600)
def test_one_million_messages_every_query_type_equals_brute_force(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data", 1_000_000, segment_bytes=8_000_000)
    with Storage.open(dataset.path) as storage:  # the indexer is behind: half of partition 0 only
        PartitionIndexer(storage.log(TOPIC, 0), block_records=20_000).step(150_000)
    for state in ("behind", "caught-up"):
        if state == "caught-up":
            with Storage.open(dataset.path) as storage:
                Indexer(storage).catch_up()
        with Storage.open(dataset.path, read_only=True) as storage:
            check_everything(QueryEngine(storage), Oracle(storage), dataset, random.Random(state))


def check_everything(engine: QueryEngine, oracle: Oracle, dataset: object, rng: random.Random) -> None:
    keys = [b"key-%d" % rng.randrange(500) for _ in range(5)]
    for key in keys:
        got = engine.run(KeyQuery(TOPIC, key)).all()[0]
        assert by_partition(got) == nonempty(oracle.newest_first(lambda r, k=key: r.key == k))
    ids = rng.sample(dataset.ids, 10)  # type: ignore[attr-defined]
    for mid in ids:
        raw = mid.encode()
        got = engine.run(IdQuery(TOPIC, mid, exhaustive=True)).all()[0]
        assert by_partition(got) == nonempty(oracle.newest_first(lambda r, m=raw: ("id", m) in r.headers))
        assert engine.run(IdQuery(TOPIC, mid, limit=1)).all()[0]
    got = engine.run(HeaderQuery(TOPIC, "user", b"user-17")).all()[0]
    assert by_partition(got) == nonempty(oracle.newest_first(lambda r: ("user", b"user-17") in r.headers))
    for predicate in (Contains(" zqxjrare "), Contains("refund 4"), JsonField.parse("order.status=paid")):
        got, completion = engine.run(ContentQuery(TOPIC, predicate, budget_bytes=None)).all()
        assert completion.reason is Reason.EXHAUSTED
        assert by_partition(got) == nonempty(oracle.content(predicate))
    t_min, t_max = dataset.t_min, dataset.t_max  # type: ignore[attr-defined]
    for _ in range(3):
        start = rng.randrange(t_min, t_max)
        end = start + rng.randrange(1, 120_000)
        got = engine.run(RangeQuery(TOPIC, start, end)).all()[0]
        assert by_partition(got) == nonempty(
            oracle.oldest_first(lambda r, a=start, b=end: a <= r.timestamp < b)
        )
        found = {m.partition: m.offset for m in engine.run(TimeQuery(TOPIC, start)).all()[0]}
        for p, records in oracle.records.items():
            assert found.get(p) == next((r.offset for r in records if r.timestamp >= start), None)
