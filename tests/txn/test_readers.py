"""logtrove's own readers show committed data only (issue 18).

A real broker takes confluent-kafka transactional producers' writes to a two-partition
topic of small segments: transactions committed and aborted, interleaved with each other
and with plain (non-transactional) records, and one transaction left open. The query
engine, over a read-only opening of the broker's data directory, must answer exactly what
a brute force over the log gives: every batch decoded, the markers applied per producer
(the aborted transactions' records dropped, nothing at or past the first offset of the
open transaction); with ``read_committed=False``, every data record.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.txn.committed_data import PARTITIONS, TOPIC, Row, Written, brute_force, transactional_producer
from typer.testing import CliRunner

from logtrove.cli.main import app
from logtrove.query import (
    Contains,
    ContentQuery,
    KeyQuery,
    MessageNotFoundError,
    OffsetQuery,
    QueryEngine,
    RangeQuery,
    TimeQuery,
)
from logtrove.storage import Storage
from logtrove.testing import wait_until


def _rows(messages: Any) -> list[Row]:
    return sorted((m.partition, m.offset, m.key, m.value, m.timestamp) for m in messages)


@pytest.fixture
def engine(written: Written) -> Iterator[QueryEngine]:
    with Storage.open(written.data, read_only=True) as storage:
        yield QueryEngine(storage)


@pytest.mark.parametrize("committed", [True, False])
def test_range_and_content_queries_match_the_brute_force(
    engine: QueryEngine, oracle: tuple[list[Row], list[Row]], committed: bool
) -> None:
    expected = oracle[0] if committed else oracle[1]
    in_range = _rows(engine.run(RangeQuery(TOPIC, 0, 1 << 50), read_committed=committed))
    assert in_range == expected
    with_needle = _rows(engine.run(ContentQuery(TOPIC, Contains("needle")), read_committed=committed))
    assert with_needle == [r for r in expected if r[3] is not None and b"needle" in r[3]]


def test_content_query_pages_with_a_cursor_over_committed_data(
    engine: QueryEngine, oracle: tuple[list[Row], list[Row]]
) -> None:
    seen: list[Row] = []
    cursor = None
    for _ in range(100):
        result = engine.run(ContentQuery(TOPIC, Contains("needle"), limit=7, cursor=cursor))
        seen += _rows(result)
        cursor = result.completion.cursor
        if cursor is None:
            break
    assert sorted(seen) == [r for r in oracle[0] if r[3] is not None and b"needle" in r[3]]


@pytest.mark.parametrize("committed", [True, False])
def test_key_queries_match_the_brute_force(
    engine: QueryEngine, oracle: tuple[list[Row], list[Row]], committed: bool
) -> None:
    expected = oracle[0] if committed else oracle[1]
    for k in range(4):
        key = b"k%d" % k
        found = _rows(engine.run(KeyQuery(TOPIC, key), read_committed=committed))
        assert found == [r for r in expected if r[2] == key]


@pytest.mark.parametrize("committed", [True, False])
def test_offset_queries_give_the_next_visible_record(
    engine: QueryEngine, oracle: tuple[list[Row], list[Row]], committed: bool
) -> None:
    expected = oracle[0] if committed else oracle[1]
    with Storage.open(engine.storage.path, read_only=True) as storage:
        ends = [storage.log(TOPIC, p).log_end_offset for p in range(PARTITIONS)]
    for p in range(PARTITIONS):
        mine = [r for r in expected if r[0] == p]
        for offset in range(ends[p]):
            following = [r for r in mine if r[1] >= offset]
            if following:
                got = engine.run(OffsetQuery(TOPIC, p, offset), read_committed=committed)
                assert _rows(got) == following[:1]
            else:
                with pytest.raises(MessageNotFoundError):
                    list(engine.run(OffsetQuery(TOPIC, p, offset), read_committed=committed))


def test_time_queries_give_the_first_visible_record_at_or_after(
    engine: QueryEngine, oracle: tuple[list[Row], list[Row]]
) -> None:
    committed, everything = oracle
    stamps = sorted({r[4] for r in everything})
    for ts in [*stamps[:: max(1, len(stamps) // 25)], stamps[-1]]:
        got = _rows(engine.run(TimeQuery(TOPIC, ts)))
        for p in range(PARTITIONS):
            # the time index answers the first record in offset order stamped ≥ ts; the
            # committed answer is the first committed one from there on
            first_any = next((r for r in everything if r[0] == p and r[4] >= ts), None)
            want = (
                None
                if first_any is None
                else next((r for r in committed if r[0] == p and r[1] >= first_any[1] and r[4] >= ts), None)
            )
            assert [r for r in got if r[0] == p] == ([want] if want else [])


def _cli_values(*args: str) -> list[tuple[int, int]]:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return sorted((m["partition"], m["offset"]) for m in map(json.loads, result.stdout.splitlines()) if m)


@pytest.mark.parametrize("isolation", [None, "read_committed", "read_uncommitted"])
def test_cli_query_isolation(
    written: Written, oracle: tuple[list[Row], list[Row]], isolation: str | None
) -> None:
    expected = oracle[1] if isolation == "read_uncommitted" else oracle[0]
    chosen = [] if isolation is None else ["--isolation", isolation]
    args = ["query", TOPIC, "--contains", "needle", "-n", "0", "--json", "--data", str(written.data), *chosen]
    assert _cli_values(*args) == [(r[0], r[1]) for r in expected if r[3] is not None and b"needle" in r[3]]


@pytest.mark.parametrize("isolation", [None, "read_committed", "read_uncommitted"])
def test_cli_consume_reads_committed_data_from_the_directory(
    written: Written, oracle: tuple[list[Row], list[Row]], isolation: str | None
) -> None:
    expected = oracle[1] if isolation == "read_uncommitted" else oracle[0]
    chosen = [] if isolation is None else ["--isolation", isolation]
    got = _cli_values("consume", TOPIC, "--json", "--data", str(written.data), *chosen)
    assert got == [(r[0], r[1]) for r in expected]


@pytest.mark.parametrize("remote", [False, True])
def test_cli_consume_from_the_end_counts_back_from_the_last_stable_offset(
    written: Written, oracle: tuple[list[Row], list[Row]], tmp_path: Path, remote: bool
) -> None:
    """``-o -N`` and ``-o end`` of a read_committed reader are relative to the LSO, as a
    read_committed Kafka consumer's ``latest``: the open transaction's records stay ahead."""
    lsos = brute_force(written.data)[2]
    assert any(lso < written_end for lso, written_end in zip(lsos.values(), _ends(written), strict=True))
    where = ["--data", str(written.data)]
    if remote:
        where = [
            "--bootstrap",
            written.broker.bootstrap,
            "--http",
            written.broker.http,
            "--data",
            str(tmp_path),
        ]
    got = _cli_values("consume", TOPIC, "--json", "-o", "-12", *where)
    assert got == [(r[0], r[1]) for r in oracle[0] if r[1] >= lsos[r[0]] - 12]
    assert _cli_values("consume", TOPIC, "--json", "-o", "end", *where) == []


def _ends(written: Written) -> list[int]:
    with Storage.open(written.data, read_only=True) as storage:
        return [storage.log(TOPIC, p).log_end_offset for p in range(PARTITIONS)]


@pytest.mark.parametrize("isolation", [None, "read_uncommitted"])
def test_cli_consume_through_the_broker_uses_read_committed_fetch(
    written: Written, oracle: tuple[list[Row], list[Row]], tmp_path: Path, isolation: str | None
) -> None:
    expected = oracle[1] if isolation == "read_uncommitted" else oracle[0]
    chosen = [] if isolation is None else ["--isolation", isolation]
    remote = ["--bootstrap", written.broker.bootstrap, "--http", written.broker.http, "--data", str(tmp_path)]
    got = _cli_values("consume", TOPIC, "--json", *remote, *chosen)
    assert got == [(r[0], r[1]) for r in expected]


def _get(written: Written, path: str, **params: Any) -> Any:
    url = f"{written.broker.http}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


def _http_rows(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return sorted((m["partition"], m["offset"]) for m in messages)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_http_search_browse_and_tag_fetch(
    written: Written, oracle: tuple[list[Row], list[Row]], isolation: str
) -> None:
    rows = oracle[0] if isolation == "read_committed" else oracle[1]
    expected = [(r[0], r[1]) for r in rows]
    needle = [(r[0], r[1]) for r in rows if r[3] is not None and b"needle" in r[3]]
    found = _get(
        written, f"topics/{TOPIC}/messages/search", contains="needle", limit=10_000, isolation=isolation
    )
    assert _http_rows(found["messages"]) == needle
    by_key = _get(written, f"topics/{TOPIC}/messages/by-key", key="k1", limit=1000, isolation=isolation)
    assert _http_rows(by_key["messages"]) == [(r[0], r[1]) for r in rows if r[2] == b"k1"]
    browsed: list[tuple[int, int]] = []
    fetched: list[tuple[int, int]] = []
    for p in range(PARTITIONS):
        offset: Any = 0
        while offset is not None:
            page = _get(
                written,
                f"topics/{TOPIC}/partitions/{p}/messages",
                offset=offset,
                limit=7,
                isolation=isolation,
            )
            browsed += _http_rows(page["messages"])
            offset = page["next_cursor"]
        page = _get(
            written,
            f"topics/{TOPIC}/partitions/{p}/tags/fetch",
            tags="*",
            max_records=10_000,
            isolation=isolation,
        )
        fetched += _http_rows(page["messages"])
    assert sorted(browsed) == expected
    assert sorted(fetched) == expected


def test_http_defaults_to_committed(written: Written, oracle: tuple[list[Row], list[Row]]) -> None:
    found = _get(written, f"topics/{TOPIC}/messages/search", contains="needle", limit=10_000)
    assert _http_rows(found["messages"]) == [
        (r[0], r[1]) for r in oracle[0] if r[3] is not None and b"needle" in r[3]
    ]


def test_spark_planner_ends_at_the_last_stable_offset(written: Written) -> None:
    """The Spark source's ``latest`` (direct mode) is the LSO when read_committed, so a
    stream never commits offsets past an open transaction; the option parses as Kafka's."""
    from logtrove.spark.options import OptionError, ReadOptions
    from logtrove.spark.ranges import DirectCatalog

    lsos = brute_force(written.data)[2]
    with Storage.open(written.data, read_only=True) as storage:
        for p in range(PARTITIONS):
            end = storage.log(TOPIC, p).log_end_offset
            assert DirectCatalog(storage).bounds(TOPIC, p) == (0, lsos[p])
            assert DirectCatalog(storage, read_committed=False).bounds(TOPIC, p) == (0, end)
    base = {"path": str(written.data), "subscribe": TOPIC}
    assert ReadOptions.parse(base).read_committed
    assert not ReadOptions.parse({**base, "isolation": "read_uncommitted"}).read_committed
    assert not ReadOptions.parse({**base, "kafka.isolation.level": "READ_UNCOMMITTED"}).read_committed
    with pytest.raises(OptionError):
        ReadOptions.parse({**base, "isolation": "dirty"})


def test_a_new_query_sees_what_was_decided_since(written: Written) -> None:
    """The walk is continued, not frozen: a transaction decided after a first query shows."""
    with Storage.open(written.data, read_only=True) as storage:
        engine = QueryEngine(storage)
        before = _rows(engine.run(RangeQuery(TOPIC, 0, 1 << 50)))
        producer = transactional_producer(written.broker.bootstrap, "reader-late")
        producer.begin_transaction()
        producer.produce(TOPIC, key=b"late", value=b"late", partition=0)
        producer.commit_transaction(10)
        late = wait_until(
            lambda: _rows(engine.run(KeyQuery(TOPIC, b"late"), read_committed=False)),
            10,
            interval_s=0,
            what="the late record found by key",
        )
        assert [r[3] for r in late] == [b"late"]
        # still behind the open transaction of the fixture: not shown read_committed
        assert _rows(engine.run(KeyQuery(TOPIC, b"late"))) == []
        assert _rows(engine.run(RangeQuery(TOPIC, 0, 1 << 50))) == before
