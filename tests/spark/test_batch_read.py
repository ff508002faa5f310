"""Batch reads through the data source equal what storage returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spark.helpers import BASE_TS, make_topic, record, stored


def _rows(df: Any) -> list[tuple[int, int, bytes | None]]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value").collect())


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
    first = df.where("offset = 0 AND partition = 0").collect()[0]
    assert first.id == "m-0" and first.tag == "TagA" and first.key == b"k0"
    assert first.timestamp.timestamp() * 1000 == BASE_TS and first.timestampType == 0
