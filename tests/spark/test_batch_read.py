"""Batch reads through the data source equal what storage returns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.spark.helpers import BASE_TS, jittered, make_topic, record, stored

from logtrove.query import Contains, ContentQuery, HeaderQuery, IdQuery, KeyQuery, QueryEngine
from logtrove.storage import Storage
from logtrove.storage.derived.indexer import Indexer


def _rows(df: Any) -> list[tuple[int, int, bytes | None]]:
    return sorted(
        (r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value").collect()
    )


def _read(spark: Any, data: Path, **options: str) -> Any:
    reader = spark.read.format("logtrove").option("path", str(data))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_whole_topic_equals_storage(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(600)), partitions=2)
    df = _read(spark, data_dir, subscribe="orders", minPartitions="5")
    assert df.rdd.getNumPartitions() >= 5
    assert _rows(df) == stored(data_dir, "orders")
    with Storage.open(data_dir, read_only=True) as storage:
        expected = sorted(
            (
                p,
                r.offset,
                r.key,
                r.timestamp,
                (r.header("id") or b"").decode(),
                (r.header("tag") or b"").decode(),
            )
            for p in range(2)
            for r in storage.log("orders", p).records()
        )
    got = sorted(
        (r.partition, r.offset, bytes(r.key), round(r.timestamp.timestamp() * 1000), r.id, r.tag)
        for r in df.select("partition", "offset", "key", "timestamp", "id", "tag").collect()
    )
    assert got == expected
    first = df.where("offset = 0 AND partition = 0").collect()[0]
    assert first.id == "m-0" and first.tag == "TagA" and first.key == b"k0"
    assert first.timestamp.timestamp() * 1000 == BASE_TS and first.timestampType == 0


def test_offset_range_equals_storage(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(300)))
    df = _read(
        spark,
        data_dir,
        subscribe="orders",
        startingOffsets='{"orders": {"0": 120}}',
        endingOffsets='{"orders": {"0": 177}}',
    )
    assert _rows(df) == stored(data_dir, "orders", 120, 177)


def test_time_range_uses_first_offsets_at_or_after_each_bound(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(300)))
    df = _read(
        spark,
        data_dir,
        subscribe="orders",
        startingTimestamp=str(BASE_TS + 50_500),
        endingTimestamp=str(BASE_TS + 90_000),
    )
    assert _rows(df) == stored(data_dir, "orders", 51, 90)


def test_empty_range_and_empty_topic_read_no_rows(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(10)))
    make_topic(data_dir, "empty", [])
    assert _read(spark, data_dir, subscribe="orders", endingOffsets="earliest").count() == 0
    assert _read(spark, data_dir, subscribe="empty").count() == 0


def test_assign_reads_only_the_given_partitions(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(90)), partitions=3)
    df = _read(spark, data_dir, assign='{"orders": [1]}')
    assert _rows(df) == [r for r in stored(data_dir, "orders") if r[0] == 1]


def test_key_id_tag_and_contains_options_equal_a_filtered_scan(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(400)), partitions=2)
    everything = _read(spark, data_dir, subscribe="orders", includeHeaders="true")
    for option, where in [
        ({"key": "k7"}, "key = X'6B37'"),
        ({"id": "m-42"}, "id = 'm-42'"),
        ({"tag": "TagA"}, "tag = 'TagA'"),
        ({"contains": "order 33"}, "cast(value as string) like '%order 33%'"),
    ]:
        filtered = _read(spark, data_dir, subscribe="orders", **option)
        assert _rows(filtered) == _rows(everything.where(where)), option
        assert filtered.count() > 0


def test_key_id_and_tag_reads_equal_the_query_engine_on_indexed_and_unindexed_data(
    spark: Any, data_dir: Path
) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(300)), partitions=2)
    with Storage.open(data_dir) as storage:
        Indexer(storage).catch_up()  # the first 300 records are indexed, the next 100 are not
    make_topic(data_dir, "orders", (record(i) for i in range(300, 400)), partitions=2)
    questions = [
        ({"key": "k7"}, KeyQuery("orders", b"k7")),
        ({"id": "m-333"}, IdQuery("orders", "m-333", exhaustive=True)),
        ({"tag": "TagA"}, HeaderQuery("orders", "tag", b"TagA")),
        ({"contains": "order 12"}, ContentQuery("orders", Contains("order 12"), budget_bytes=None)),
    ]
    with Storage.open(data_dir, read_only=True) as storage:
        engine = QueryEngine(storage)
        for option, question in questions:
            expected = sorted((m.partition, m.offset, m.value) for m in engine.run(question))
            assert expected, option
            assert _rows(_read(spark, data_dir, subscribe="orders", **option)) == expected, option


def test_headers_column_with_include_headers(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(5)))
    row = _read(spark, data_dir, subscribe="orders", includeHeaders="true").where("offset = 3").collect()[0]
    assert [(h.key, bytes(h.value)) for h in row.headers] == [("id", b"m-3"), ("tag", b"TagA")]


def test_subscribe_pattern_reads_matching_topics(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "logs.a", (record(i) for i in range(7)))
    make_topic(data_dir, "logs.b", (record(i) for i in range(5)))
    make_topic(data_dir, "other", (record(i) for i in range(3)))
    df = _read(spark, data_dir, subscribePattern=r"logs\..*")
    assert sorted(df.groupBy("topic").count().collect()) == [("logs.a", 7), ("logs.b", 5)]


def _first_at_or_after(data: Path, topic: str, partition: int, ts: int) -> int:
    """Brute force: the first offset (in offset order) stamped ≥ ``ts``, else the log end."""
    with Storage.open(data, read_only=True) as storage:
        log = storage.log(topic, partition)
        return next((r.offset for r in log.records() if r.timestamp >= ts), log.log_end_offset)


def test_offsets_by_timestamp_per_partition_on_out_of_order_timestamps(spark: Any, data_dir: Path) -> None:
    """``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: per partition, the
    first offset stamped at or after the time (Kafka's offsetsForTimes, so a late record
    after that offset is read even if stamped earlier); partitions missing from the JSON
    fall back to ``startingOffsets`` / ``endingOffsets``; a time after every record is
    the log end."""
    make_topic(data_dir, "events", (jittered(i) for i in range(600)), partitions=3, batch=20)
    starts = {"0": BASE_TS + 105_500, "1": BASE_TS + 31_000}  # partition 2: startingOffsets
    ends = {"0": BASE_TS + 452_000, "2": BASE_TS + 10_000_000}  # partition 1: endingOffsets
    df = _read(
        spark,
        data_dir,
        subscribe="events",
        startingOffsetsByTimestamp=json.dumps({"events": starts}),
        endingOffsetsByTimestamp=json.dumps({"events": ends}),
        startingOffsets='{"events": {"2": 17}}',
        endingOffsets='{"events": {"1": 150}}',
    )
    bounds = {
        0: (
            _first_at_or_after(data_dir, "events", 0, starts["0"]),
            _first_at_or_after(data_dir, "events", 0, ends["0"]),
        ),
        1: (_first_at_or_after(data_dir, "events", 1, starts["1"]), 150),
        2: (17, 200),
    }
    assert bounds == {0: (34, 151), 1: (11, 150), 2: (17, 200)}
    expected = sorted((p, o, v) for p, o, v in stored(data_dir, "events") if bounds[p][0] <= o < bounds[p][1])
    assert _rows(df) == expected
    # partition 0 starts at a record stamped exactly at the bound and still reads a later
    # one stamped before it (offset semantics, as Spark's Kafka source)
    late = df.where(f"partition = 0 AND timestamp < timestamp_millis({starts['0']})").count()
    assert late > 0
