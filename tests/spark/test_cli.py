"""``logtrove export`` and ``logtrove sql`` end to end (on the shared session), and the
install hint when pyspark is missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.spark.helpers import BASE_TS, make_topic
from tests.spark.test_pipelines import ACCESS_LINES
from typer.testing import CliRunner

from logtrove.cli.main import app
from logtrove.records import NewRecord

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
