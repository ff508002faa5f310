"""A deliberately naive data source that prunes its plan by pushed filters, the way the
PySpark docs suggest. It exists to show the PySpark 4.3.0 stale-reader bug that
``logtrove``'s source is designed around (see ``logtrove.spark.source``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, Filter, InputPartition

ROWS = 2000
SLICES = 20


class NaiveReader(DataSourceReader):
    def __init__(self) -> None:
        self.wanted: int | None = None

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            if isinstance(f, EqualTo) and f.attribute == ("slice",):
                self.wanted = int(f.value)
            else:
                yield f

    def partitions(self) -> Sequence[InputPartition]:
        slices = range(SLICES) if self.wanted is None else [self.wanted]
        return [InputPartition(s) for s in slices]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, int]]:
        per = ROWS // SLICES
        for n in range(partition.value * per, (partition.value + 1) * per):
            yield (n, partition.value)


class NaiveSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "naive_pruning"

    def schema(self) -> str:
        return "n int, slice int"

    def reader(self, schema: Any) -> NaiveReader:
        return NaiveReader()
