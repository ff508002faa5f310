"""Deliberately naive data sources that prune their plan by pushed filters. They exist to
show the PySpark 4.3.0 stale-reader bug that ``logtrove``'s source is designed around
(see ``logtrove.spark.source``).

* :class:`NaiveSource` prunes the way the PySpark docs suggest: ``pushFilters`` keeps
  the filter on the reader, ``partitions()`` plans from it.
* :class:`ConsumeOnceSource` hands every filter back to Spark and lets ``partitions()``
  take the recorded filter and clear it, so that a reused reader would plan everything.
  It loses rows all the same: Spark calls ``pushFilters`` and ``partitions()`` once, in
  one planner worker, and caches the resulting *partition list* (with the pickled
  reader) on the source object, so a later query without a pushable filter runs that
  list without calling Python at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, Filter, InputPartition

ROWS = 2000
SLICES = 20


def _rows(partition: InputPartition) -> Iterator[tuple[int, int]]:
    per = ROWS // SLICES
    for n in range(partition.value * per, (partition.value + 1) * per):
        yield (n, partition.value)


def _wanted_slice(f: Filter) -> int | None:
    return int(f.value) if isinstance(f, EqualTo) and f.attribute == ("slice",) else None


class NaiveReader(DataSourceReader):
    def __init__(self) -> None:
        self.wanted: int | None = None

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            if _wanted_slice(f) is not None:
                self.wanted = _wanted_slice(f)
            else:
                yield f

    def partitions(self) -> Sequence[InputPartition]:
        slices = range(SLICES) if self.wanted is None else [self.wanted]
        return [InputPartition(s) for s in slices]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, int]]:
        return _rows(partition)


class NaiveSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "naive_pruning"

    def schema(self) -> str:
        return "n int, slice int"

    def reader(self, schema: Any) -> NaiveReader:
        return NaiveReader()


class ConsumeOnceReader(DataSourceReader):
    def __init__(self) -> None:
        self.pending: int | None = None

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        for f in filters:
            if _wanted_slice(f) is not None:
                self.pending = _wanted_slice(f)
        return filters  # Spark re-applies every filter

    def partitions(self) -> Sequence[InputPartition]:
        wanted, self.pending = self.pending, None  # consumed by the first plan only
        slices = range(SLICES) if wanted is None else [wanted]
        return [InputPartition(s) for s in slices]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, int]]:
        return _rows(partition)


class ConsumeOnceSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "consume_once_pruning"

    def schema(self) -> str:
        return "n int, slice int"

    def reader(self, schema: Any) -> ConsumeOnceReader:
        return ConsumeOnceReader()
