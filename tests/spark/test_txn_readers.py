"""The Spark source and export show committed data only (issue 18).

The data of :mod:`tests.txn.test_readers` (committed, aborted and one open transaction of
confluent-kafka's transactional producers, with plain records, written by a real broker)
read by a real local Spark session, in direct mode (segment files) and remote mode (Kafka
protocol), and exported to Parquet: exactly the brute force's committed records by
default, exactly every data record with ``isolation=read_uncommitted``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.txn.committed_data import (  # noqa: F401  (module-scoped fixtures shared with the query tests)
    TOPIC,
    Row,
    Written,
    oracle,
    written,
)

from logtrove.spark.export import ExportSpec, export_topic

Oracle = tuple[list[Row], list[Row]]


def _offsets(df: Any) -> list[tuple[int, int]]:
    return sorted((int(r[0]), int(r[1])) for r in df.select("partition", "offset").collect())


def _expected(oracle: Oracle, isolation: str | None, needle: bool = False) -> list[tuple[int, int]]:  # noqa: F811
    rows = oracle[1] if isolation == "read_uncommitted" else oracle[0]
    return [(r[0], r[1]) for r in rows if not needle or (r[3] is not None and b"needle" in r[3])]


@pytest.mark.slow
@pytest.mark.parametrize("isolation", [None, "read_uncommitted"])
def test_spark_source_direct_and_remote(
    spark: Any,
    written: Written,  # noqa: F811
    oracle: Oracle,  # noqa: F811
    isolation: str | None,
) -> None:
    chosen = {} if isolation is None else {"isolation": isolation}
    for where in ({"path": str(written.data)}, {"bootstrap": written.broker.bootstrap}):
        reader = spark.read.format("logtrove").options(subscribe=TOPIC, **where, **chosen)
        assert _offsets(reader.load()) == _expected(oracle, isolation), where
        filtered = spark.read.format("logtrove").options(
            subscribe=TOPIC, contains="needle", **where, **chosen
        )
        assert _offsets(filtered.load()) == _expected(oracle, isolation, needle=True), where
    split = spark.read.format("logtrove").options(
        subscribe=TOPIC, path=str(written.data), minPartitions="7", **chosen
    )
    assert _offsets(split.load()) == _expected(oracle, isolation)


@pytest.mark.slow
@pytest.mark.parametrize("committed", [True, False])
def test_export_writes_committed_records(
    spark: Any,
    written: Written,  # noqa: F811
    oracle: Oracle,  # noqa: F811
    tmp_path: Path,
    committed: bool,
) -> None:
    out = tmp_path / "table"
    spec = ExportSpec(TOPIC, out, path=str(written.data), read_committed=committed)
    result = export_topic(spark, spec)
    expected = _expected(oracle, None if committed else "read_uncommitted")
    assert result.rows_added == len(expected)
    assert _offsets(spark.read.parquet(str(out))) == expected
