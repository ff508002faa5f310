"""``logtrove export`` and ``logtrove sql`` end to end (on the shared session), and the
install hint when pyspark is missing."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.spark.helpers import ACCESS_LINES, BASE_TS, make_topic, record, stored
from typer.testing import CliRunner

from logtrove.cli.main import app
from logtrove.records import NewRecord
from logtrove.testing import wait_until

runner = CliRunner()


def test_export_then_sql_over_the_table_and_the_topic(spark: Any, tmp_path: Path) -> None:
    data, table = tmp_path / "data", tmp_path / "access"
    make_topic(data, "access_log", [NewRecord(line.encode(), timestamp=BASE_TS) for line in ACCESS_LINES * 2])
    args = [
        "export",
        "access_log",
        "--to",
        str(table),
        "--parse",
        "combined-log",
        "--data",
        str(data),
        "--json",
    ]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["rows_added"] == 10
    again = runner.invoke(app, args)
    assert json.loads(again.output) | {} == {
        "topic": "access_log",
        "table": str(table),
        "rows_added": 0,
        "rows_total": 10,
    }
    out = runner.invoke(
        app,
        [
            "sql",
            "SELECT status, count(*) AS n FROM access GROUP BY status ORDER BY n DESC, status",
            "--table",
            f"access={table}",
            "--data",
            str(data),
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output.splitlines()[0]) == {"status": None, "n": 2}
    topic = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM access_log", "--data", str(data), "--json"])
    assert json.loads(topic.output) == {"n": 10}


def test_sql_error_is_one_line_and_exit_code_1(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data, "t", [NewRecord(b"x", timestamp=BASE_TS)])
    result = runner.invoke(app, ["sql", "SELECT nope FROM t", "--data", str(data)])
    assert result.exit_code == 1
    assert "UNRESOLVED_COLUMN" in result.output


def test_commands_without_pyspark_say_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark now raises ImportError
    for args in (
        ["sql", "SELECT 1", "--data", str(tmp_path)],
        ["export", "t", "--to", str(tmp_path / "x"), "--data", str(tmp_path)],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1
        assert "pip install 'logtrove[spark]'" in result.output


def test_export_with_a_given_json_schema_uses_and_keeps_it(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql.types import IntegerType, StringType

    data, table = tmp_path / "data", tmp_path / "orders"
    make_topic(data, "orders", (record(i) for i in range(40)), partitions=2)
    make_topic(data, "orders", [NewRecord(b"not json", timestamp=BASE_TS)], partitions=2)
    args = ["export", "orders", "--to", str(table), "--parse", "json", "--data", str(data), "--json"]
    first = runner.invoke(app, [*args, "--schema", "n INT, text STRING, missing STRING"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["rows_added"] == 41
    df = spark.read.parquet(str(table))
    # inference would have made n a bigint and found no `missing` column
    assert (df.schema["n"].dataType, df.schema["text"].dataType) == (IntegerType(), StringType())
    rows = sorted((r.n, r.text, r.missing) for r in df.where("n IS NOT NULL").collect())
    assert rows == [(i, f"order {i}", None) for i in range(40)]
    [bad] = df.where("n IS NULL").collect()
    assert (bad.value, bad.text) == ("not json", None)
    saved = json.loads((table / "_logtrove_export.json").read_text())
    assert [f["name"] for f in json.loads(saved["json_schema"])["fields"]] == ["n", "text", "missing"]
    make_topic(data, "orders", (record(i) for i in range(40, 45)), partitions=2)
    again = runner.invoke(app, args)  # no --schema: the saved one, not a new inference
    assert json.loads(again.output)["rows_added"] == 5
    assert spark.read.parquet(str(table)).schema["n"].dataType == IntegerType()


def test_export_stream_keeps_exporting_new_records_until_stopped(spark: Any, tmp_path: Path) -> None:
    """``--stream`` runs micro-batches every ``--every`` seconds: records appended while
    it runs reach the table exactly once; stopping the query ends the command."""
    data, table = tmp_path / "data", tmp_path / "events"
    make_topic(data, "events", (record(i) for i in range(30)), partitions=2)
    problems: list[str] = []

    def feed_then_stop() -> None:
        try:
            _wait_for_rows(spark, table, 30)
            make_topic(data, "events", (record(i) for i in range(30, 50)), partitions=2)
            _wait_for_rows(spark, table, 50)
        except TimeoutError as e:  # the first 30, or the 20 appended, never reached the table
            problems.append(str(e))
        finally:
            for query in spark.streams.active:
                if query.name == "export_events":
                    query.stop()

    feeder = threading.Thread(target=feed_then_stop)
    feeder.start()
    result = runner.invoke(
        app,
        ["export", "events", "--to", str(table), "--stream", "--every", "1", "--data", str(data), "--json"],
    )
    feeder.join()
    assert problems == []
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "topic": "events",
        "table": str(table),
        "rows_added": 50,
        "rows_total": 50,
    }
    rows = sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(str(table)).collect())
    assert rows == [(p, o, v.decode()) for p, o, v in stored(data, "events") if v is not None]


def _wait_for_rows(spark: Any, table: Path, rows: int, deadline_s: float = 180.0) -> None:
    """Poll the table until it holds ``rows`` rows; :class:`TimeoutError` after ``deadline_s``
    (a deadline only to fail, not a threshold)."""
    from pyspark.errors import AnalysisException

    from logtrove.spark.export import table_rows

    def reached() -> bool:
        try:
            return bool(table_rows(spark, table) >= rows)
        except AnalysisException:  # the sink's log exists, its first files not yet
            return False

    wait_until(reached, deadline_s, interval_s=0.5, what=f"{rows} rows in the table")


def test_export_sessions_get_the_full_jit_and_sql_sessions_the_quick_one() -> None:
    from logtrove.spark.session import java_options

    assert "TieredStopAtLevel=1" in java_options(False)  # logtrove sql: starts sooner
    assert "TieredStopAtLevel" not in java_options(True)  # logtrove export: C2, 3-6x faster on long jobs
    assert "log4j2.configurationFile=file:" in java_options(True)


def test_a_failed_export_leaves_the_target_as_it_was(spark: Any, tmp_path: Path) -> None:
    from logtrove.spark.export import ExportSpec, export_topic

    data, tables = tmp_path / "data", tmp_path / "tables"
    make_topic(data, "access_log", [NewRecord(line.encode(), timestamp=BASE_TS) for line in ACCESS_LINES])
    args = ["--parse", "combined-log", "--data", str(data)]
    # no such topic: one line before Spark starts, and nothing written
    missing = runner.invoke(app, ["export", "nope", "--to", str(tables / "nope"), *args])
    assert missing.exit_code == 1 and "unknown topic(s): nope" in missing.output
    assert len(missing.output.strip().splitlines()) == 1 and not tables.exists()
    # a run that fails inside Spark takes away the directories it made...
    spec = ExportSpec("nope", tables / "nope", path=str(data), parse="combined-log")
    with pytest.raises(Exception, match="unknown topic"):
        export_topic(spark, spec)
    assert not tables.exists()
    # ...and an empty directory stays empty
    (tables / "empty").mkdir(parents=True)
    with pytest.raises(Exception, match="unknown topic"):
        export_topic(spark, ExportSpec("nope", tables / "empty", path=str(data), parse="combined-log"))
    assert list((tables / "empty").iterdir()) == []
    # an export, then a failed rerun (its topic gone): the table reads the same, settings kept
    table = tables / "access"
    done = runner.invoke(app, ["export", "access_log", "--to", str(table), *args, "--json"])
    assert done.exit_code == 0 and json.loads(done.output)["rows_total"] == len(ACCESS_LINES), done.output
    settings = (table / "_logtrove_export.json").read_bytes()
    with pytest.raises(ValueError, match="holds an export of access_log with --parse combined-log"):
        export_topic(spark, ExportSpec("access_log", table, path=str(data), parse="raw"))
    with pytest.raises(Exception, match="not a logtrove data directory"):
        export_topic(
            spark, ExportSpec("access_log", table, path=str(tmp_path / "gone"), parse="combined-log")
        )
    assert (table / "_logtrove_export.json").read_bytes() == settings
    assert spark.read.parquet(str(table)).count() == len(ACCESS_LINES)
    # the library call reports each committed micro-batch
    lines: list[str] = []
    export_topic(spark, ExportSpec("access_log", tables / "again", path=str(data), parse="raw"), lines.append)
    assert lines and lines[-1].endswith(f"({len(ACCESS_LINES)} this run)"), lines
    # a directory that holds something else is refused, untouched
    (tables / "photos").mkdir()
    (tables / "photos" / "cat.jpg").write_bytes(b"meow")
    refused = runner.invoke(app, ["export", "access_log", "--to", str(tables / "photos"), *args])
    assert refused.exit_code == 1 and "holds no logtrove export" in refused.output
    assert [p.name for p in (tables / "photos").iterdir()] == ["cat.jpg"]
