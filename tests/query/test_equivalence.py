"""Every query type returns exactly what a brute-force scan of the log returns, whatever
the state of the indexes: none, behind, caught up, after reopening, damaged."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from logtrove.query import (
    Contains,
    ContentQuery,
    HeaderQuery,
    IdQuery,
    JsonField,
    KeyQuery,
    Message,
    OffsetQuery,
    PositionQuery,
    Query,
    QueryEngine,
    RangeQuery,
    Reason,
    Regex,
    TimeQuery,
)
from logtrove.storage import Storage
from logtrove.storage.derived.indexer import Indexer, PartitionIndexer

from .helpers import TOPIC, Dataset, Oracle, by_partition, nonempty

STATES = ["unindexed", "behind", "caught-up", "damaged"]


def prepare(src: Path, dst: Path, state: str) -> None:
    shutil.copytree(src, dst)
    if state == "unindexed":
        return
    storage = Storage.open(dst)
    try:
        if state == "behind":
            for p in range(storage.topic(TOPIC).partitions):
                PartitionIndexer(storage.log(TOPIC, p), block_records=700).step(7_000 * (p + 1))
        else:
            Indexer(storage, block_records=1_500).catch_up()
    finally:
        storage.close()
    if state == "damaged":
        damage(dst / f"{TOPIC}-0", random.Random(3))


def damage(directory: Path, rng: random.Random) -> None:
    """Flip bytes in some key indexes, delete a skip file, cut a tag index short."""
    keyidx = sorted(directory.glob("*.keyidx"))
    for path in keyidx[::2]:
        data = bytearray(path.read_bytes())
        for _ in range(5):
            data[rng.randrange(len(data))] ^= 0xFF
        path.write_bytes(bytes(data))
    skips = sorted(directory.glob("*.skip"))
    if skips:
        skips[len(skips) // 2].unlink()
    tags = sorted(directory.glob("*.tagidx"))
    if tags:
        with tags[-1].open("r+b") as f:
            f.truncate(max(0, os.fstat(f.fileno()).st_size - 5))


@pytest.fixture(scope="module", params=STATES)
def engine(
    request: pytest.FixtureRequest, dataset: Dataset, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QueryEngine]:
    dst = tmp_path_factory.mktemp(request.param) / "data"
    prepare(dataset.path, dst, request.param)
    storage = Storage.open(dst, read_only=True)
    yield QueryEngine(storage)
    storage.close()


@pytest.fixture(scope="module")
def oracle(engine: QueryEngine) -> Oracle:
    return Oracle(engine.storage)


def pages(engine: QueryEngine, make: object, limit: int) -> tuple[list[Message], int]:
    """Every result of a paginated query, and the number of pages."""
    out: list[Message] = []
    cursor = None
    n = 0
    while True:
        q: Query = make(limit, cursor)  # type: ignore[operator]
        messages, completion = engine.run(q).all()
        out += messages
        n += 1
        assert len(messages) <= limit
        if completion.cursor is None:
            assert completion.reason in (Reason.EXHAUSTED, Reason.HINT)
            return out, n
        assert completion.reason in (Reason.LIMIT, Reason.BUDGET)
        cursor = completion.cursor


def test_key_lookup_equals_brute_force_newest_first(
    engine: QueryEngine, oracle: Oracle, dataset: Dataset
) -> None:
    for key in dataset.keys[:6]:
        got = engine.run(KeyQuery(TOPIC, key)).all()[0]
        assert by_partition(got) == nonempty(oracle.newest_first(lambda r, k=key: r.key == k))
        assert all(m.key == key for m in got)


def test_key_lookup_pages_with_a_cursor_and_a_time_window(
    engine: QueryEngine, oracle: Oracle, dataset: Dataset
) -> None:
    start = dataset.t_min + (dataset.t_max - dataset.t_min) // 4
    end = dataset.t_min + (dataset.t_max - dataset.t_min) * 3 // 4
    for key in dataset.keys[12:15]:
        got, n = pages(engine, lambda lim, cur, k=key: KeyQuery(TOPIC, k, None, start, end, lim, cur), 5)
        expected = oracle.newest_first(lambda r, k=key: r.key == k and start <= r.timestamp < end)
        assert by_partition(got) == nonempty(expected)
        assert n >= sum(map(len, expected.values())) // 5


def test_header_lookup_equals_brute_force(engine: QueryEngine, oracle: Oracle, dataset: Dataset) -> None:
    for user in dataset.users[:3]:
        got, _ = pages(
            engine, lambda lim, cur, u=user: HeaderQuery(TOPIC, "user", u, limit=lim, cursor=cur), 400
        )
        assert by_partition(got) == nonempty(oracle.newest_first(lambda r, u=user: ("user", u) in r.headers))


def test_header_that_is_not_indexed_is_answered_by_scanning(engine: QueryEngine, oracle: Oracle) -> None:
    got = engine.run(HeaderQuery(TOPIC, "tag", b"TagB")).all()[0]
    assert by_partition(got) == nonempty(oracle.newest_first(lambda r: ("tag", b"TagB") in r.headers))


def test_client_id_lookup_finds_every_copy(engine: QueryEngine, oracle: Oracle, dataset: Dataset) -> None:
    rng = random.Random(11)
    for mid in rng.sample(dataset.ids, 10):
        raw = mid.encode()
        want = oracle.newest_first(lambda r, m=raw: ("id", m) in r.headers)
        exhaustive = engine.run(IdQuery(TOPIC, mid, exhaustive=True)).all()[0]
        assert by_partition(exhaustive) == nonempty(want)
        hinted = engine.run(IdQuery(TOPIC, mid)).all()[0]
        assert hinted, "the hint narrows the search but never loses the message"
        assert set(by_partition(hinted)) <= set(nonempty(want))


def test_position_ids_of_results_read_the_same_record(engine: QueryEngine, oracle: Oracle) -> None:
    records = list(oracle.all())
    for p, r in random.Random(5).sample(records, 15):
        (m,) = engine.run(PositionQuery(Message(TOPIC, p, r.offset, 0, None, None).id)).all()[0]
        assert (m.partition, m.offset, m.value) == (p, r.offset, r.value)
        by_id = engine.run(IdQuery(TOPIC, m.id, limit=1)).all()[0]
        assert by_id[0].offset == r.offset


@pytest.mark.parametrize(
    "predicate",
    [
        Contains("failed"),
        Contains(" charlie delta "),
        Contains("zqxjrare"),
        Contains(" zqxjrare "),
        Regex(r"refund \d{5}$"),
        Regex(r"^echo"),
        JsonField.parse("order.status=failed"),
        JsonField.parse("tags.1=y"),
        JsonField.parse("order.missing=1"),
    ],
    ids=lambda p: p.description,
)
def test_content_search_equals_brute_force(engine: QueryEngine, oracle: Oracle, predicate: object) -> None:
    got, completion = engine.run(ContentQuery(TOPIC, predicate, budget_bytes=None)).all()  # type: ignore[arg-type]
    assert completion.reason is Reason.EXHAUSTED
    assert by_partition(got) == nonempty(oracle.content(predicate))  # type: ignore[arg-type]


def test_rare_token_skips_blocks_once_indexed(engine: QueryEngine, oracle: Oracle) -> None:
    got, completion = engine.run(ContentQuery(TOPIC, Contains(" zqxjrare "))).all()
    assert by_partition(got) == nonempty(oracle.content(Contains(" zqxjrare ")))
    indexed = any(engine.storage.path.glob(f"{TOPIC}-*/*.skip"))
    assert (completion.stats.blocks_skipped > 0) == indexed


def test_content_search_in_a_time_window_with_pages(
    engine: QueryEngine, oracle: Oracle, dataset: Dataset
) -> None:
    start = dataset.t_min + (dataset.t_max - dataset.t_min) // 3
    end = start + (dataset.t_max - dataset.t_min) // 3
    pred = Contains("paid")
    got, n = pages(
        engine, lambda lim, cur: ContentQuery(TOPIC, pred, None, start, end, limit=lim, cursor=cur), 400
    )
    assert by_partition(got) == nonempty(oracle.content(pred, start, end))
    assert n > 1


def test_budget_stops_the_scan_and_the_cursor_continues_it(engine: QueryEngine, oracle: Oracle) -> None:
    pred = JsonField.parse("order.status=pending")
    got, n = pages(
        engine, lambda lim, cur: ContentQuery(TOPIC, pred, limit=lim, cursor=cur, budget_bytes=400_000), 10**9
    )
    assert n > 1
    assert by_partition(got) == nonempty(oracle.content(pred))


def test_time_range_equals_brute_force(engine: QueryEngine, oracle: Oracle, dataset: Dataset) -> None:
    rng = random.Random(2)
    for _ in range(3):
        start = rng.randrange(dataset.t_min, dataset.t_max)
        end = start + rng.randrange(1, 60_000)
        got, _ = pages(
            engine, lambda lim, cur, a=start, b=end: RangeQuery(TOPIC, a, b, limit=lim, cursor=cur), 300
        )
        assert by_partition(got) == nonempty(
            oracle.oldest_first(lambda r, a=start, b=end: a <= r.timestamp < b)
        )


def test_time_lookup_is_the_first_record_at_or_after(
    engine: QueryEngine, oracle: Oracle, dataset: Dataset
) -> None:
    rng = random.Random(4)
    for t in [
        dataset.t_min - 1,
        dataset.t_max + 1,
        *(rng.randrange(dataset.t_min, dataset.t_max) for _ in range(8)),
    ]:
        got = {m.partition: m.offset for m in engine.run(TimeQuery(TOPIC, t)).all()[0]}
        want = {}
        for p, records in oracle.records.items():
            first = next((r.offset for r in records if r.timestamp >= t), None)
            if first is not None:
                want[p] = first
        assert got == want


def test_offset_lookup_returns_that_record(engine: QueryEngine, oracle: Oracle) -> None:
    rng = random.Random(9)
    for p, records in oracle.records.items():
        for r in rng.sample(records, 20):
            (m,) = engine.run(OffsetQuery(TOPIC, p, r.offset)).all()[0]
            assert (m.offset, m.key, m.value, m.headers) == (r.offset, r.key, r.value, r.headers)
