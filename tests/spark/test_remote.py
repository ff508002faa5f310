"""Remote mode against a live ``logtrove serve``: reads over the Kafka protocol equal
direct reads of the same data directory, the writer produces through the broker, and the
direct writer refuses while the broker holds the directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.broker.conftest import BrokerProcess, free_port
from tests.spark.helpers import make_topic, record


@pytest.fixture
def live(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    make_topic(data, "orders", (record(i) for i in range(500)), partitions=2)
    make_topic(data, "sink", [], partitions=2)
    proc = BrokerProcess(data, free_port())
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


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
    assert _rows(read(bootstrap=live.bootstrap, key="k3")) == _rows(read(path=str(live.data), key="k3"))


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
