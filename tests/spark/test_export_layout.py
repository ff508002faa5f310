"""The export's table layout when a task meets several hours interleaved: every record in
the directory of its date and hour, once, across reruns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spark.helpers import BASE_TS, make_topic

from logtrove.records import NewRecord
from logtrove.spark.export import ExportSpec, export_topic

HOUR_MS = 3_600_000
HOURS = 5


def across_hours(i: int) -> NewRecord:
    """Record ``i``, stamped in hour ``i % HOURS``: every task meets the hours interleaved."""
    return NewRecord(value=f'{{"n": {i}}}'.encode(), timestamp=BASE_TS + (i % HOURS) * HOUR_MS + i)


def rows_by_hour(spark: Any, table: Path) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for r in spark.read.parquet(str(table)).select("date", "hour", "n").collect():
        out.setdefault((str(r.date), r.hour), []).append(r.n)
    return {k: sorted(v) for k, v in out.items()}


def expected_by_hour(count: int) -> dict[tuple[str, int], list[int]]:
    """BASE_TS is 2023-11-14 22:13 UTC: hours 22 and 23, then 0 to 2 of the next day."""
    return {
        ("2023-11-14", 22 + h) if h < 2 else ("2023-11-15", h - 2): list(range(h, count, HOURS))
        for h in range(HOURS)
    }


def export(spark: Any, data: Path, out: Path) -> int:
    return export_topic(spark, ExportSpec("spread", out, path=str(data), parse="json")).rows_added


def test_export_of_interleaved_hours_puts_each_record_in_its_hour_once_across_reruns(
    spark: Any, tmp_path: Path
) -> None:
    data, out = tmp_path / "data", tmp_path / "table"
    make_topic(data, "spread", (across_hours(i) for i in range(200)), partitions=2)
    assert export(spark, data, out) == 200
    assert export(spark, data, out) == 0
    make_topic(data, "spread", (across_hours(i) for i in range(200, 260)), partitions=2)
    assert export(spark, data, out) == 60
    assert rows_by_hour(spark, out) == expected_by_hour(260)
    assert sorted(p.parent.name + "/" + p.name for p in out.glob("date=*/hour=*")) == [
        "date=2023-11-14/hour=22",
        "date=2023-11-14/hour=23",
        "date=2023-11-15/hour=0",
        "date=2023-11-15/hour=1",
        "date=2023-11-15/hour=2",
    ]
