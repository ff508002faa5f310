"""The ``logtrove`` Python data source (PySpark ≥ 4.2 API): batch and streaming reads,
batch and streaming writes. Imports pyspark; loaded only by :func:`logtrove.spark.register`.

Pruning — why there is no ``pushFilters``
-----------------------------------------
PySpark 4.3.0 plans a read with pushed filters in one planner worker: it calls
``pushFilters`` and then ``partitions()`` on a fresh reader, and caches the resulting
partition list (with the pickled reader) on the data source object that the DataFrame
shares with every later query on it. A later query with no pushable filter does not call
Python at all: it runs the cached list. So querying the same DataFrame (or temp view)
first with ``WHERE slice = 3`` — or only ``explain()``-ing that query — and then without
a pushable filter silently returns too few rows. Clearing the recorded filters in
``partitions()`` does not help, since ``partitions()`` is not called again, and the read
tasks of the two queries get identical bytes, so a pruned plan cannot be recognised as
stale at read time either (``tests/spark/naive_source.py`` and
``tests/spark/test_pushdown.py`` show both). No plan made from a query's filters is
therefore safe on 4.3.0, and this source never lets one shape its plan: it prunes only by
its options, which belong to the DataFrame itself and so cannot go stale — ``assign``
(partition), ``startingOffsets`` / ``endingOffsets`` (offset), ``startingTimestamp`` /
``endingTimestamp`` and the ``…ByTimestamp`` variants (time, through the time indexes)
and ``key`` / ``id`` / ``tag`` / ``contains`` (through the query engine's indexes).
``WHERE`` clauses are evaluated by Spark over the option range, so every query sees every
row the options cover. (Implementing ``pushFilters`` would also make every read fail
with ``DATA_SOURCE_PUSHDOWN_DISABLED`` in sessions without
``spark.sql.python.filterPushdown.enabled``.)
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from logtrove.spark import direct
from logtrove.spark.columns import column_names, requested_columns, spark_schema
from logtrove.spark.options import OptionError, ReadOptions
from logtrove.spark.ranges import (
    Catalog,
    DirectCatalog,
    OffsetRange,
    plan_batch,
    split_ranges,
    start_offset,
    topic_partitions,
)
from logtrove.storage import Storage

if TYPE_CHECKING:
    from logtrove.spark.writer import WriteOptions

SOURCE_NAME = "logtrove"


class RangePartition(InputPartition):
    """One Spark task: an offset range and the header names of its topic."""

    def __init__(self, rng: OffsetRange, id_header: str, tag_header: str) -> None:
        super().__init__(rng)
        self.rng = rng
        self.id_header = id_header
        self.tag_header = tag_header


def _open_catalog(options: ReadOptions) -> tuple[Catalog, Any]:
    """A catalog and the thing to close afterwards."""
    if options.path:
        storage = Storage.open(options.path, read_only=True)
        return DirectCatalog(storage, read_committed=options.read_committed), storage
    from logtrove.spark import remote  # remote mode only: see _read

    assert options.bootstrap is not None
    catalog = remote.RemoteCatalog(
        options.bootstrap, read_committed=options.read_committed, security=options.security
    )
    return catalog, catalog


def _partitions(options: ReadOptions, catalog: Catalog, ranges: list[OffsetRange]) -> list[RangePartition]:
    names = {t: catalog.header_names(t) for t in {r.topic for r in ranges}}
    flt = options.filter
    indexed = options.path is not None and (flt.key is not None or flt.id is not None or flt.tag is not None)
    # an index lookup covers a whole partition at once: one task per partition
    pieces = ranges if indexed else split_ranges(ranges, catalog, options.min_partitions)
    return [RangePartition(r, *names[r.topic]) for r in pieces]


_frozen = {"modules": 0}  # how many modules were imported at the last freeze


def freeze_imported() -> bool:
    """Move the objects alive now out of the garbage collector's sight
    (:func:`gc.freeze`) when modules were imported since the last time; returns whether
    it did.

    PySpark's Python worker runs a full :func:`gc.collect` after every task, which walks
    every tracked object: a read worker holds about 90,000 (pyspark, pyarrow, numpy and
    pandas, which PySpark imports after the first task), and the walk took 20-90 ms per
    task, about half of the worker's time in a full scan of 1 M records in 4 tasks.
    Those objects are the imported modules' and live as long as the worker, so the walk
    finds nothing there; once frozen, the walk covers only what later tasks made. The
    freeze is done once per batch of new imports (twice in a worker's life, typically),
    after a collection, so only the objects of the task running at that moment are kept
    beyond the collector's reach, and those are freed by reference counting as usual
    unless they form cycles.
    """
    if len(sys.modules) == _frozen["modules"]:
        return False
    gc.collect()
    gc.freeze()
    _frozen["modules"] = len(sys.modules)
    return True


def _columns(options: ReadOptions, schema: Any) -> tuple[ReadOptions, tuple[str, ...] | None]:
    """The options to decode with (``headers`` only when the schema has it) and the
    columns to keep, or ``None`` when the decoded batches are already the schema's."""
    names = requested_columns(schema)
    options = replace(options, include_headers="headers" in names)
    return options, None if names == tuple(column_names(options.include_headers)) else names


def _read(options: ReadOptions, part: RangePartition, columns: tuple[str, ...] | None) -> Iterator[Any]:
    batches = _decoded(options, part)
    if columns is None:
        return batches
    return (batch.select(columns) for batch in batches)


def _decoded(options: ReadOptions, part: RangePartition) -> Iterator[Any]:
    freeze_imported()
    if options.path:
        return direct.read_range(
            options.path,
            part.rng,
            options.filter,
            options.include_headers,
            read_committed=options.read_committed,
        )
    # Remote mode (and the writer) bring in the Kafka client, its TLS and SASL
    # libraries and the wire schemas: imported only when used, a direct-mode read worker
    # holds about half the Python objects, and the full garbage collection that PySpark's
    # worker runs after every task takes half as long.
    from logtrove.spark import remote

    assert options.bootstrap is not None
    return remote.read_range(
        options.bootstrap,
        part.rng,
        options.filter,
        options.include_headers,
        part.id_header,
        part.tag_header,
        read_committed=options.read_committed,
        security=options.security,
    )


class LogtroveReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: Any) -> None:
        self.options, self.columns = _columns(options, schema)

    def partitions(self) -> Sequence[InputPartition]:
        catalog, closer = _open_catalog(self.options)
        try:
            return _partitions(self.options, catalog, plan_batch(self.options, catalog))
        finally:
            closer.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # an empty plan reaches here as Spark's placeholder InputPartition(None)
        return (
            _read(self.options, partition, self.columns)
            if isinstance(partition, RangePartition)
            else iter(())
        )


Offsets = dict[str, dict[str, int]]


class LogtroveStreamReader(DataSourceStreamReader):
    """Micro-batches over offsets ``{"topic": {"partition": next offset}}`` (Kafka's JSON).

    New partitions appear with their log start offset. ``maxOffsetsPerTrigger`` is shared
    among partitions in proportion to their backlog; ``Trigger.AvailableNow`` passes
    :class:`ReadAllAvailable` and gets everything present at that moment.
    """

    def __init__(self, options: ReadOptions, schema: Any) -> None:
        self.options, self.columns = _columns(options, schema)

    def _latest(self) -> Offsets:
        catalog, closer = _open_catalog(self.options)
        try:
            out: Offsets = {}
            for topic, p in topic_partitions(self.options, catalog):
                out.setdefault(topic, {})[str(p)] = catalog.bounds(topic, p)[1]
            return out
        finally:
            closer.close()

    def initialOffset(self) -> Offsets:  # noqa: N802
        catalog, closer = _open_catalog(self.options)
        try:
            out: Offsets = {}
            for topic, p in topic_partitions(self.options, catalog):
                out.setdefault(topic, {})[str(p)] = start_offset(self.options, catalog, topic, p)
            return out
        finally:
            closer.close()

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:  # noqa: N802
        latest = self._latest()
        if not isinstance(limit, ReadMaxRows):
            return latest
        return cap_offsets(start, latest, limit.max_rows)

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        ranges = []
        for topic, parts in end.items():
            for p, stop in parts.items():
                begin = start.get(topic, {}).get(p, 0)
                if stop > begin:
                    ranges.append(OffsetRange(topic, int(p), begin, stop))
        if not ranges:
            return []
        catalog, closer = _open_catalog(self.options)
        try:
            return _partitions(self.options, catalog, ranges)
        finally:
            closer.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # an empty plan reaches here as Spark's placeholder InputPartition(None)
        return (
            _read(self.options, partition, self.columns)
            if isinstance(partition, RangePartition)
            else iter(())
        )

    def commit(self, end: Offsets) -> None:
        """Nothing to release: offsets live in Spark's checkpoint, the log keeps the data."""


def cap_offsets(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """End offsets that advance at most ``max_rows`` in total, shared by backlog."""
    backlog = {
        (t, p): max(stop - start.get(t, {}).get(p, 0), 0)
        for t, parts in latest.items()
        for p, stop in parts.items()
    }
    total = sum(backlog.values())
    out: Offsets = {t: dict(parts) for t, parts in latest.items()}
    if total <= max_rows:
        return out
    granted = 0
    for (t, p), lag in sorted(backlog.items()):
        share = min(lag, max_rows * lag // total)
        granted += share
        out[t][p] = start.get(t, {}).get(p, 0) + share
    for (t, p), lag in sorted(backlog.items()):  # hand out what rounding kept back
        extra = min(max_rows - granted, lag - (out[t][p] - start.get(t, {}).get(p, 0)))
        if extra > 0:
            out[t][p] += extra
            granted += extra
    return out


@dataclass
class WriteCount(WriterCommitMessage):
    records: int


class LogtroveWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriteCount:
        from logtrove.spark.writer import write_rows

        return WriteCount(write_rows(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Each task's records are durable when its write returns."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records of tasks that finished stay in the log (Kafka sink semantics: at least once)."""


class LogtroveStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriteCount:
        from logtrove.spark.writer import write_rows

        return WriteCount(write_rows(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Each task's records are durable when its write returns."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """At least once, as Spark's Kafka sink."""


class LogtroveDataSource(DataSource):
    """``spark.read.format("logtrove")``; see :mod:`logtrove.spark.options` for options."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> Any:
        include = str(self.options.get("includeHeaders", self.options.get("includeheaders", "false")))
        return spark_schema(include.lower() in ("true", "1", "yes"))

    def reader(self, schema: Any) -> LogtroveReader:
        return LogtroveReader(ReadOptions.parse(dict(self.options)), schema)

    def streamReader(self, schema: Any) -> LogtroveStreamReader:  # noqa: N802
        return LogtroveStreamReader(ReadOptions.parse(dict(self.options), streaming=True), schema)

    # Save modes, as Spark's Kafka sink has them: a topic always exists and only grows, so
    # writing appends, and Overwrite (which would mean deleting records) is refused. Spark
    # itself refuses its default, ErrorIfExists, for every Python data source before the
    # source is asked (the Kafka sink, a JVM source, treats it as append), so a batch write
    # needs .mode("append").
    def writer(self, schema: Any, overwrite: bool) -> LogtroveWriter:
        from logtrove.spark.writer import WriteOptions

        _refuse_overwrite(overwrite)
        return LogtroveWriter(WriteOptions.parse(dict(self.options)))

    def streamWriter(self, schema: Any, overwrite: bool) -> LogtroveStreamWriter:  # noqa: N802
        from logtrove.spark.writer import WriteOptions

        _refuse_overwrite(overwrite)
        return LogtroveStreamWriter(WriteOptions.parse(dict(self.options)))


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise OptionError(
            "save mode Overwrite is not allowed: a topic is only appended to "
            '(as with Spark\'s Kafka sink); use .mode("append")'
        )


def offsets_json(offsets: Offsets) -> str:
    return json.dumps(offsets, sort_keys=True)
