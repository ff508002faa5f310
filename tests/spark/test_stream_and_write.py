"""Streaming reads (availableNow, exactly once across triggers) and the writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.spark.helpers import make_topic, record, stored


def _stream_once(
    spark: Any, data: Path, checkpoint: Path, out: Path, *, available_now: bool = True, **options: str
) -> list[int]:
    """Run one query to the end of the data (availableNow, or micro-batches until idle);
    returns the rows of each micro-batch."""
    reader = spark.readStream.format("logtrove").option("path", str(data))
    for k, v in options.items():
        reader = reader.option(k, v)
    writer = (
        reader.load()
        .selectExpr("partition", "offset", "cast(value as string) AS value")
        .writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .option("path", str(out))
    )
    if available_now:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(180)
    else:
        query = writer.start()
        query.processAllAvailable()
        query.stop()
    assert query.exception() is None
    return [int(p["numInputRows"]) for p in query.recentProgress if p["numInputRows"]]


def test_available_now_picks_up_appended_records_exactly_once(spark: Any, tmp_path: Path) -> None:
    data, checkpoint, out = tmp_path / "data", tmp_path / "ckpt", tmp_path / "out"
    options = {"subscribe": "events", "startingOffsets": "earliest"}
    make_topic(data, "events", (record(i) for i in range(300)), partitions=2)
    assert _stream_once(spark, data, checkpoint, out, **options) == [300]
    make_topic(data, "events", (record(i) for i in range(300, 450)), partitions=2)
    assert _stream_once(spark, data, checkpoint, out, **options) == [150]
    rows = sorted((r.partition, r.offset) for r in spark.read.parquet(str(out)).collect())
    assert rows == [(p, o) for p, o, _ in stored(data, "events")]
    assert len(rows) == len(set(rows)) == 450
    # maxOffsetsPerTrigger caps micro-batches of a running query (availableNow gets
    # ReadAllAvailable from Spark and reads everything, as the API requires)
    make_topic(data, "events", (record(i) for i in range(450, 600)), partitions=2)
    batches = _stream_once(
        spark, data, checkpoint, out, available_now=False, maxOffsetsPerTrigger="70", **options
    )
    assert sum(batches) == 150 and max(batches) <= 70
    assert spark.read.parquet(str(out)).count() == 600


def test_writer_round_trip_direct(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data, "sink", [], partitions=3)
    df = spark.createDataFrame(
        [(f"k{i}", f"value {i}", i * 1000 + 1_700_000_000_000) for i in range(500)],
        "key string, value string, ms long",
    ).selectExpr(
        "key",
        "value",
        "timestamp_millis(ms) AS timestamp",
        "array(named_struct('key', 'id', 'value', cast(concat('m-', key) as binary))) AS headers",
    )
    df.repartition(3).write.format("logtrove").option("path", str(data)).option("topic", "sink").mode(
        "append"
    ).save()
    back = spark.read.format("logtrove").option("path", str(data)).option("subscribe", "sink").load()
    got = sorted((bytes(r.key).decode(), bytes(r.value).decode(), r.id) for r in back.collect())
    assert got == sorted((f"k{i}", f"value {i}", f"m-k{i}") for i in range(500))
    from logtrove.records.partitioner import partition_for_key

    for r in back.select("key", "partition").collect():
        assert r.partition == partition_for_key(bytes(r.key), 3)


def test_streaming_writer_copies_a_topic(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data, "source", (record(i) for i in range(120)), partitions=2)
    make_topic(data, "copy", [], partitions=2)
    query = (
        spark.readStream.format("logtrove")
        .options(path=str(data), subscribe="source", startingOffsets="earliest", includeHeaders="true")
        .load()
        .select("key", "value", "partition", "headers")
        .writeStream.format("logtrove")
        .option("path", str(data))
        .option("topic", "copy")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    assert sorted((p, v) for p, _, v in stored(data, "copy")) == sorted(
        (p, v) for p, _, v in stored(data, "source")
    )


def test_save_modes_are_those_of_the_kafka_sink(spark: Any, tmp_path: Path) -> None:
    """Append appends; Overwrite is refused (records are never deleted by a write), as by
    Spark's Kafka sink; Spark refuses its default ErrorIfExists for any Python data source."""
    data = tmp_path / "data"
    make_topic(data, "sink", [record(0)])
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    writer = df.write.format("logtrove").option("path", str(data)).option("topic", "sink")
    with pytest.raises(Exception, match=r'Overwrite is not allowed.*mode\("append"\)'):
        writer.mode("overwrite").save()
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("logtrove").option("path", str(data)).option("topic", "sink").save()
    assert len(stored(data, "sink")) == 1
    writer.mode("append").save()
    assert [v for _, _, v in stored(data, "sink")][1:] == [b"v"]
