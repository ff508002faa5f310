"""A user-given schema: the source reads only its columns, in its order, or says clearly
which column it cannot give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.spark.helpers import make_topic, record

from logtrove.spark.columns import ColumnSchemaError, requested_columns


def _load(spark: Any, data: Path, schema: str | None = None, **options: str) -> Any:
    reader = spark.read.format("logtrove").options(path=str(data), subscribe="orders", **options)
    return (reader.schema(schema) if schema else reader).load()


def _sorted(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in rows)


def test_user_schema_with_a_subset_gives_exactly_those_columns_and_values(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(300)), partitions=2)
    pruned = _load(spark, data_dir, "value binary, partition int, tag string")
    assert pruned.columns == ["value", "partition", "tag"]
    full = _load(spark, data_dir).select("value", "partition", "tag")
    assert _sorted(pruned.collect()) == _sorted(full.collect())
    assert len(pruned.collect()) == 300


def test_user_schema_with_headers_reads_them_without_include_headers(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(20)))
    pruned = _load(spark, data_dir, "offset bigint, headers array<struct<key: string, value: binary>>")
    full = _load(spark, data_dir, includeHeaders="true").select("offset", "headers")
    assert _sorted(pruned.collect()) == _sorted(full.collect())
    assert {h.key for r in pruned.collect() for h in r.headers} == {"id", "tag"}


def test_user_schema_with_an_unknown_column_is_a_clear_error(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(5)))
    with pytest.raises(Exception, match="the logtrove source has no column 'offsets'"):
        _load(spark, data_dir, "partition int, offsets bigint").collect()


def test_user_schema_with_another_type_is_a_clear_error(spark: Any, data_dir: Path) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(5)))
    with pytest.raises(Exception, match="column 'value' of the logtrove source is binary, not string"):
        _load(spark, data_dir, "value string").collect()


def test_streaming_read_with_a_user_schema_gives_its_columns(
    spark: Any, data_dir: Path, tmp_path: Path
) -> None:
    make_topic(data_dir, "orders", (record(i) for i in range(50)), partitions=2)
    stream = (
        spark.readStream.format("logtrove")
        .options(path=str(data_dir), subscribe="orders", startingOffsets="earliest")
        .schema("offset bigint, partition int")
        .load()
    )
    query = stream.writeStream.format("memory").queryName("pruned_stream").trigger(availableNow=True).start()
    query.awaitTermination()
    rows = spark.sql("SELECT * FROM pruned_stream").collect()
    assert spark.table("pruned_stream").columns == ["offset", "partition"]
    assert sorted((r.partition, r.offset) for r in rows) == sorted((i % 2, i // 2) for i in range(50))


def test_requested_columns_refuses_not_null_and_repeated_columns() -> None:
    from pyspark.sql.types import StructType

    assert requested_columns(StructType.fromDDL("key binary, id string")) == ("key", "id")
    with pytest.raises(ColumnSchemaError, match="nullable"):
        requested_columns(StructType.fromDDL("partition int NOT NULL"))
    with pytest.raises(ColumnSchemaError, match="twice"):
        requested_columns(StructType.fromDDL("partition int, partition int"))
