"""Export to Parquet (exactly once across reruns), combined-log parsing, SQL over topics
and tables, and the compaction offset-map job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.spark.helpers import ACCESS_LINES, BASE_TS, make_topic, record
from typer.testing import CliRunner

from logtrove.cli.main import app
from logtrove.records import NewRecord
from logtrove.spark.compaction import build_offset_map
from logtrove.spark.export import ExportSpec, export_topic
from logtrove.spark.sql import register_tables, register_topics, run_sql
from logtrove.storage import Storage
from logtrove.storage.cleaner import OffsetMapFile


def test_combined_log_lines_parse_into_columns(spark: Any, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "table"
    make_topic(
        data,
        "access-log",
        [NewRecord(line.encode(), timestamp=BASE_TS + i) for i in range(5) for line in [ACCESS_LINES[i]]],
    )
    result = export_topic(spark, ExportSpec("access-log", out, path=str(data), parse="combined-log"))
    assert result.rows_added == 5
    rows = {r.offset: r for r in spark.read.parquet(str(out)).collect()}
    bot = rows[0]
    assert (bot.remote_addr, bot.ident, bot.remote_user) == ("66.249.65.159", None, None)
    assert bot.time_local.isoformat() == "2014-11-06T13:10:38"  # +0600 → UTC (session time zone UTC)
    assert (bot.method, bot.path, bot.protocol, bot.status, bot.bytes) == (
        "GET",
        "/news/53f8d72920ba2744fe873ebc.html",
        "HTTP/1.1",
        404,
        177,
    )
    assert bot.referer is None and "Googlebot/2.1" in bot.user_agent
    assert (rows[1].remote_user, rows[1].method, rows[1].path, rows[1].status, rows[1].bytes) == (
        "alice",
        "POST",
        "/api/orders?id=4711",
        201,
        5123,
    )
    assert rows[1].referer == "https://shop.example/cart"
    assert (rows[2].status, rows[2].bytes) == (304, None)
    assert (rows[3].method, rows[3].path, rows[3].status) == (None, None, 400)
    assert rows[4].status is None and rows[4].value == "this is not an access log line"
    assert {(str(r.date), r.hour) for r in rows.values()} == {("2023-11-14", 22)}


def test_export_rerun_adds_no_duplicates_and_picks_up_new_records(spark: Any, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "table"
    make_topic(data, "orders", (record(i) for i in range(200)), partitions=2)
    spec = ExportSpec("orders", out, path=str(data), parse="json")
    assert export_topic(spark, spec).rows_added == 200
    assert export_topic(spark, spec).rows_added == 0
    make_topic(data, "orders", (record(i) for i in range(200, 260)), partitions=2)
    assert export_topic(spark, spec).rows_added == 60
    table = spark.read.parquet(str(out))
    rows = [(r.partition, r.offset) for r in table.select("partition", "offset").collect()]
    assert len(rows) == len(set(rows)) == 260
    assert sorted(r.n for r in table.select("n").collect()) == list(range(260))
    assert json.loads((out / "_logtrove_export.json").read_text())["parse"] == "json"
    assert [p.name for p in out.glob("date=*/hour=*")] == ["hour=22"]


def test_sql_over_topic_views_and_exported_tables(spark: Any, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "table"
    make_topic(data, "access-log", [NewRecord(line.encode(), timestamp=BASE_TS) for line in ACCESS_LINES * 3])
    export_topic(spark, ExportSpec("access-log", out, path=str(data), parse="combined-log"))
    views = register_topics(spark, path=str(data))
    register_tables(spark, {"access_parsed": out})
    assert views == {"access_log": "access-log"}
    cols, rows = run_sql(
        spark, "SELECT status, count(*) AS n FROM access_parsed GROUP BY status ORDER BY status"
    )
    assert cols == ["status", "n"]
    assert rows == [(None, 3), (201, 3), (304, 3), (400, 3), (404, 3)]
    _, [(n,)] = run_sql(
        spark, "SELECT count(*) FROM access_log WHERE cast(value AS string) LIKE '%Googlebot%'"
    )
    assert n == 3


def test_offset_map_job_writes_a_map_the_cleaner_compacts_with(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(
        data,
        "users",
        (
            NewRecord(f"v{i}".encode(), key=f"user-{i % 37}".encode(), timestamp=BASE_TS + i)
            for i in range(1000)
        ),
        configs={"cleanup.policy": "compact", "segment.bytes": "4000"},
        batch=20,
    )
    result = build_offset_map(spark, str(data), "users", 0, tmp_path / "users-0.map")
    with Storage.open(data, read_only=True) as storage:
        log = storage.log("users", 0)
        end = log.segments[-1].base_offset
        expected: dict[bytes, int] = {}
        for r in log.records(0, end):
            assert r.key is not None
            expected[r.key] = r.offset
    assert (result.keys, result.end_offset) == (len(expected), end)
    offset_map = OffsetMapFile(result.path)
    try:
        assert offset_map.end_offset == end
        assert all(offset_map.latest(k) == o for k, o in expected.items())
        assert offset_map.latest(b"nobody") is None
    finally:
        offset_map.close()
    compacted = CliRunner().invoke(
        app, ["compact", "users", "--partition", "0", "--offset-map", str(result.path), "--data", str(data)]
    )
    assert compacted.exit_code == 0, compacted.output
    with Storage.open(data, read_only=True) as storage:
        kept = [(r.key, r.offset) for r in storage.log("users", 0).records(0, end)]
    assert sorted(kept) == sorted(expected.items())


def test_export_since_and_until_bound_the_first_run(spark: Any, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "table"
    make_topic(data, "orders", (record(i) for i in range(100)))
    spec = ExportSpec("orders", out, path=str(data), since=BASE_TS + 20_000, until=BASE_TS + 50_000)
    assert export_topic(spark, spec).rows_added == 30
    assert sorted(r.offset for r in spark.read.parquet(str(out)).collect()) == list(range(20, 50))
