"""The export's table layout with concurrent output writers (no sort by date and hour):
the same rows and files per date and hour as the sorted write, exactly once on rerun."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.spark.helpers import BASE_TS, make_topic

from logtrove.records import NewRecord
from logtrove.spark.export import CONCURRENT_WRITERS_CONF, ExportSpec, export_topic

HOUR_MS = 3_600_000
HOURS = 5


def across_hours(i: int) -> NewRecord:
    """Record ``i``, stamped in hour ``i % HOURS``: every task meets the hours interleaved."""
    return NewRecord(value=f'{{"n": {i}}}'.encode(), timestamp=BASE_TS + (i % HOURS) * HOUR_MS + i)


@contextmanager
def session_writers(spark: Any, value: str) -> Iterator[None]:
    spark.conf.set(CONCURRENT_WRITERS_CONF, value)
    try:
        yield
    finally:
        spark.conf.unset(CONCURRENT_WRITERS_CONF)


def layout(table: Path) -> Counter[str]:
    """Parquet files per ``date=…/hour=…`` directory."""
    return Counter(str(f.parent.relative_to(table)) for f in table.glob("date=*/hour=*/*.parquet"))


def rows_by_hour(spark: Any, table: Path) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for r in spark.read.parquet(str(table)).select("date", "hour", "n").collect():
        out.setdefault((str(r.date), r.hour), []).append(r.n)
    return {k: sorted(v) for k, v in out.items()}


def expected_by_hour(count: int) -> dict[tuple[str, int], list[int]]:
    return {
        ("2023-11-14", 22 + h) if h < 2 else ("2023-11-15", h - 2): list(range(h, count, HOURS))
        for h in range(HOURS)
    }


def export(spark: Any, data: Path, out: Path) -> int:
    return export_topic(spark, ExportSpec("spread", out, path=str(data), parse="json")).rows_added


def test_unsorted_export_writes_the_rows_and_files_of_the_sorted_one(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data, "spread", (across_hours(i) for i in range(300)), partitions=2)
    assert export(spark, data, tmp_path / "unsorted") == 300
    with session_writers(spark, "0"):  # the session's own setting: 0 is Spark's sort
        assert export(spark, data, tmp_path / "sorted") == 300
    assert rows_by_hour(spark, tmp_path / "unsorted") == expected_by_hour(300)
    assert rows_by_hour(spark, tmp_path / "sorted") == expected_by_hour(300)
    assert layout(tmp_path / "unsorted") == layout(tmp_path / "sorted")
    assert len(layout(tmp_path / "unsorted")) == HOURS


def test_export_past_the_writer_bound_falls_back_to_sorting_with_the_same_rows(
    spark: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    make_topic(data, "spread", (across_hours(i) for i in range(300)), partitions=2)
    with session_writers(spark, "2"):  # 5 hours per task, 2 writers: the rest is sorted
        assert export(spark, data, tmp_path / "table") == 300
    assert rows_by_hour(spark, tmp_path / "table") == expected_by_hour(300)


def test_unsorted_export_reruns_add_each_record_once(spark: Any, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "table"
    make_topic(data, "spread", (across_hours(i) for i in range(200)), partitions=2)
    assert export(spark, data, out) == 200
    assert export(spark, data, out) == 0
    make_topic(data, "spread", (across_hours(i) for i in range(200, 260)), partitions=2)
    assert export(spark, data, out) == 60
    assert rows_by_hour(spark, out) == expected_by_hour(260)


def test_export_leaves_the_sessions_writer_setting_as_it_was(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data, "spread", (across_hours(i) for i in range(20)))
    export(spark, data, tmp_path / "table")
    assert spark.conf.get(CONCURRENT_WRITERS_CONF, None) is None
    with session_writers(spark, "3"):
        export(spark, data, tmp_path / "again")
        assert spark.conf.get(CONCURRENT_WRITERS_CONF) == "3"
