"""Remote mode against a live ``logtrove serve``: reads over the Kafka protocol equal
direct reads of the same data directory, the writer produces through the broker, and the
direct writer refuses while the broker holds the directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.spark.helpers import make_topic, record

from logtrove.testing import BrokerProcess, free_port


@pytest.fixture
def live(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    # records are stamped in 2023: without retention.ms=-1 the broker's retention would
    # delete their segments a few seconds into a test
    configs = {"segment.bytes": "20000", "retention.ms": "-1"}
    make_topic(data, "orders", (record(i) for i in range(500)), partitions=2, configs=configs)
    make_topic(data, "sink", [], partitions=2, configs=configs)
    with BrokerProcess(data, free_port()) as proc:
        yield proc


def _rows(df: Any) -> list[tuple[Any, ...]]:
    cols = ["topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "id", "tag"]
    return sorted(tuple(r) for r in df.select(*cols).collect())


def test_remote_reads_equal_direct_reads(spark: Any, live: BrokerProcess) -> None:
    def read(**where: str) -> Any:
        return spark.read.format("logtrove").options(subscribe="orders", **where).load()

    remote = read(bootstrap=live.bootstrap)
    direct = read(path=str(live.data))
    assert remote.count() == 500
    assert _rows(remote) == _rows(direct)
    ranged = {
        "startingOffsets": '{"orders": {"0": 30, "1": 200}}',
        "endingOffsets": '{"orders": {"0": 90, "1": -1}}',
    }
    assert _rows(read(bootstrap=live.bootstrap, **ranged)) == _rows(read(path=str(live.data), **ranged))


@pytest.mark.parametrize(
    "where",
    [
        {"key": "k3"},
        {"id": "m-123"},
        {"tag": "TagA"},
        {"contains": "order 1"},
        {"key": "k4", "tag": "TagB", "contains": "order 4"},
        {"id": "m-8", "startingOffsets": '{"orders": {"0": 2, "1": 5}}'},
        {"tag": "\ufffd"},
    ],
    ids=",".join,
)
def test_filtered_remote_reads_equal_direct_reads(
    spark: Any, live: BrokerProcess, where: dict[str, str]
) -> None:
    def read(**mode: str) -> Any:
        return spark.read.format("logtrove").options(subscribe="orders", **mode, **where).load()

    remote = _rows(read(bootstrap=live.bootstrap))
    assert remote == _rows(read(path=str(live.data)))
    if "\ufffd" not in where.get("tag", ""):
        assert remote


def test_remote_writer_produces_through_the_broker(spark: Any, live: BrokerProcess) -> None:
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(200)], "key string, value string")
    df.write.format("logtrove").option("bootstrap", live.bootstrap).option("topic", "sink").mode(
        "append"
    ).save()
    back = spark.read.format("logtrove").options(path=str(live.data), subscribe="sink").load()
    assert sorted((bytes(r.key).decode(), bytes(r.value).decode()) for r in back.collect()) == sorted(
        (f"k{i}", f"v{i}") for i in range(200)
    )


def test_direct_writer_refuses_while_a_broker_holds_the_directory(spark: Any, live: BrokerProcess) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="use the bootstrap option"):
        df.write.format("logtrove").option("path", str(live.data)).option("topic", "sink").mode(
            "append"
        ).save()


def _stream_available_now(spark: Any, bootstrap: str, checkpoint: Path, out: Path) -> list[int]:
    """One availableNow run of a remote streaming read into Parquet; rows per micro-batch."""
    query = (
        spark.readStream.format("logtrove")
        .options(bootstrap=bootstrap, subscribe="orders", startingOffsets="earliest")
        .load()
        .select("partition", "offset", "key", "value", "timestamp", "id", "tag")
        .writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .option("path", str(out))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    return [int(p["numInputRows"]) for p in query.recentProgress if p["numInputRows"]]


def test_remote_streaming_picks_up_produced_records_exactly_once(
    spark: Any, live: BrokerProcess, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    checkpoint, out = tmp_path / "ckpt", tmp_path / "out"
    assert _stream_available_now(spark, live.bootstrap, checkpoint, out) == [500]
    producer = Producer({"bootstrap.servers": live.bootstrap, "linger.ms": 5})
    for i in range(40):
        producer.produce(
            "orders", value=f"new {i}".encode(), key=b"fresh", partition=i % 2, headers=[("id", b"n-%d" % i)]
        )
    assert producer.flush(30) == 0
    assert _stream_available_now(spark, live.bootstrap, checkpoint, out) == [40]
    streamed = spark.read.parquet(str(out))
    direct = spark.read.format("logtrove").options(path=str(live.data), subscribe="orders").load()
    cols = ["partition", "offset", "key", "value", "timestamp", "id", "tag"]
    got = sorted(tuple(r) for r in streamed.select(*cols).collect())
    assert len(got) == len(set(got)) == 540
    assert got == sorted(tuple(r) for r in direct.select(*cols).collect())
    fresh = sorted((r.partition, bytes(r.value), r.id) for r in streamed.where("key = 'fresh'").collect())
    assert fresh == sorted((i % 2, f"new {i}".encode(), f"n-{i}") for i in range(40))
