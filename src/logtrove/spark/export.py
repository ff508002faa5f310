"""Incremental export of a topic to a Parquet table partitioned by date and hour.

::

    TO/
      date=2026-11-22/hour=3/part-….parquet    the table (date and hour of the record timestamp, UTC)
      _spark_metadata/                          the file sink's log of committed files
      _checkpoint/                              offsets per partition of every committed run
      _logtrove_export.json                     topic, parser and the JSON schema in use

The export is a Structured Streaming query with Spark's file sink: each run reads from
the offsets in ``_checkpoint`` to the log end (``Trigger.AvailableNow``; ``--stream``
keeps running) and commits the new files and the new offsets together. A rerun, or a run
after a crash, therefore adds each record exactly once. Read the table with
``spark.read.parquet(TO)`` (which honours ``_spark_metadata``) or ``logtrove sql``.

``since`` is where the first run starts (later runs continue from the checkpoint);
``until`` drops records stamped at or after it (they count as exported).

A run that fails leaves no half-made table. The source and the topic are checked before
Spark starts (:func:`check_source`). A first run into a new or empty directory that
fails takes away everything it created (with any parent directories it made), so a
rerun starts clean; the export cannot be written elsewhere and moved, because the file
sink's log names each file by its absolute path. A later run that fails leaves the
committed table to Spark's commit protocol (files of an uncommitted batch are not in
``_spark_metadata``, so readers never see them, and the next run redoes the batch) and
puts ``_logtrove_export.json`` back. A directory that is neither empty nor an export is
refused. ``--stream`` keeps the batches it committed before a failure or an interrupt.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logtrove.spark.options import ReadOptions
from logtrove.spark.parse import infer_json_schema, parse_values
from logtrove.spark.ranges import Catalog, DirectCatalog, plan_batch

SETTINGS_FILE = "_logtrove_export.json"
CHECKPOINT_DIR = "_checkpoint"
SAMPLE_PER_PARTITION = 1000
PROGRESS_EVERY_S = 2


@dataclass(frozen=True)
class ExportSpec:
    """What to export and how."""

    topic: str
    to: Path
    path: str | None = None
    bootstrap: str | None = None
    parse: str = "raw"
    json_schema: str | None = None
    since: int | None = None
    until: int | None = None
    stream: bool = False
    trigger_seconds: float = 10.0
    read_committed: bool = True  # else every record, those of aborted transactions too
    client_config: str | None = None  # with bootstrap: TLS / SASL settings file (clientConfig)

    def source_options(self) -> dict[str, str]:
        opts = {
            "subscribe": self.topic,
            "startingOffsets": "earliest",
            "isolation": "read_committed" if self.read_committed else "read_uncommitted",
        }
        if self.path:
            opts["path"] = self.path
        if self.bootstrap:
            opts["bootstrap"] = self.bootstrap
            if self.client_config:
                opts["clientConfig"] = self.client_config
        if self.since is not None:
            opts["startingTimestamp"] = str(self.since)
        return opts


@dataclass(frozen=True)
class ExportResult:
    """Rows written by this run (records past ``until`` are read but not written)."""

    rows_added: int
    batches: int
    table: Path


@contextlib.contextmanager
def _catalog(options: ReadOptions) -> Iterator[Catalog]:
    if options.path:
        from logtrove.storage import Storage

        with Storage.open(options.path, read_only=True) as storage:
            yield DirectCatalog(storage, read_committed=options.read_committed)
    else:
        from logtrove.spark.remote import RemoteCatalog

        catalog = RemoteCatalog(
            str(options.bootstrap), read_committed=options.read_committed, security=options.security
        )
        try:
            yield catalog
        finally:
            catalog.close()


def check_source(spec: ExportSpec) -> None:
    """Raise (StorageError, ValueError, OSError) if the data directory or broker cannot be
    read or has no such topic: cheap, and before a Spark session starts."""
    options = ReadOptions.parse(spec.source_options())
    with _catalog(options) as catalog:
        options.select_topics(catalog.topic_names())


def _sample_endings(spec: ExportSpec) -> str:
    """endingOffsets JSON that reads the first records of each partition."""
    options = ReadOptions.parse(spec.source_options())
    with _catalog(options) as catalog:
        ranges = plan_batch(options, catalog)
    ends: dict[str, dict[str, int]] = {spec.topic: {}}
    for r in ranges:
        ends[spec.topic][str(r.partition)] = min(r.end, r.start + SAMPLE_PER_PARTITION)
    return json.dumps(ends)


def _json_schema(spark: Any, spec: ExportSpec) -> Any:
    """The schema for JSON parsing: given, else the one saved by an earlier run, else inferred."""
    from pyspark.sql.types import StructType, _parse_datatype_json_string

    settings = spec.to / SETTINGS_FILE
    if spec.json_schema:
        return StructType.fromDDL(spec.json_schema)
    if settings.exists():
        saved = json.loads(settings.read_text())
        if saved.get("json_schema"):
            return _parse_datatype_json_string(saved["json_schema"])
    reader = spark.read.format("logtrove")
    for k, v in {**spec.source_options(), "endingOffsets": _sample_endings(spec)}.items():
        reader = reader.option(k, v)
    return infer_json_schema(spark, reader.load().selectExpr("cast(value as string) AS value"))


def _check_target(spec: ExportSpec) -> None:
    """Refuse a directory that holds something other than an export of this topic with
    this parser (before anything is written)."""
    settings = spec.to / SETTINGS_FILE
    if settings.exists():
        saved = json.loads(settings.read_text())
        if saved.get("topic") != spec.topic or saved.get("parse") != spec.parse:
            raise ValueError(
                f"{spec.to} holds an export of {saved.get('topic')} with --parse {saved.get('parse')}; "
                "export into a new directory to change either"
            )
    elif spec.to.exists() and (not spec.to.is_dir() or any(spec.to.iterdir())):
        raise ValueError(f"{spec.to} is not empty and holds no logtrove export; export into a new directory")


def _save_settings(spec: ExportSpec, schema: Any) -> None:
    spec.to.mkdir(parents=True, exist_ok=True)
    payload = {"topic": spec.topic, "parse": spec.parse, "json_schema": schema.json() if schema else None}
    (spec.to / SETTINGS_FILE).write_text(json.dumps(payload, indent=2) + "\n")


@dataclass(frozen=True)
class _Before:
    """What ``TO`` was before a run, to put it back if the run fails."""

    created: Path | None  # the outermost directory the run creates (None: TO existed)
    fresh: bool  # no export there yet: a failure removes everything the run made
    settings: bytes | None

    @classmethod
    def of(cls, to: Path) -> _Before:
        created = None
        for directory in (to, *to.parents):
            if directory.exists():
                break
            created = directory
        settings = to / SETTINGS_FILE
        return cls(created, not settings.exists(), settings.read_bytes() if settings.exists() else None)

    def restore(self, to: Path) -> None:
        if self.created is not None:
            shutil.rmtree(self.created, ignore_errors=True)
        elif self.fresh:
            for child in to.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        elif self.settings is not None:
            (to / SETTINGS_FILE).write_bytes(self.settings)


def table_rows(spark: Any, table: Path) -> int:
    """Rows in an exported table (0 before the first commit)."""
    if not (table / "_spark_metadata").is_dir():
        return 0
    return int(spark.read.parquet(str(table)).count())


def _committed(table: Path) -> bool:
    log = table / "_spark_metadata"
    return log.is_dir() and any(not p.name.startswith(".") for p in log.iterdir())


def export_topic(spark: Any, spec: ExportSpec, progress: Callable[[str], None] | None = None) -> ExportResult:
    """Run one export (until caught up, or forever with ``stream``); what a failure
    leaves is in the module's docstring. ``progress`` gets a line for each micro-batch
    committed (its records and the run's total so far)."""
    _check_target(spec)
    before = _Before.of(spec.to)
    try:
        return _export(spark, spec, progress or (lambda _line: None))
    except BaseException:
        if not (spec.stream and _committed(spec.to)):
            before.restore(spec.to)
        raise


def _report_batches(query: Any, seen: set[Any], progress: Callable[[str], None]) -> None:
    for p in query.recentProgress:
        batch = p.get("batchId")
        if batch in seen or not p.get("numInputRows", 0):
            continue
        seen.add(batch)
        total = sum(q.get("numInputRows", 0) for q in query.recentProgress if q.get("batchId") in seen)
        progress(f"batch {batch}: {p['numInputRows']:,} records ({total:,} this run)")


def _export(spark: Any, spec: ExportSpec, progress: Callable[[str], None]) -> ExportResult:
    from pyspark.sql import functions as sf

    schema = _json_schema(spark, spec) if spec.parse == "json" else None
    _save_settings(spec, schema)
    before = table_rows(spark, spec.to)
    reader = spark.readStream.format("logtrove")
    for k, v in spec.source_options().items():
        reader = reader.option(k, v)
    df = parse_values(reader.load(), spec.parse, schema)
    if spec.until is not None:
        df = df.where(sf.col("timestamp") < sf.timestamp_millis(sf.lit(spec.until)))
    df = df.withColumn("date", sf.date_format("timestamp", "yyyy-MM-dd")).withColumn(
        "hour", sf.hour("timestamp")
    )
    writer = (
        df.writeStream.format("parquet")
        .partitionBy("date", "hour")
        .option("path", str(spec.to))
        .option("checkpointLocation", str(spec.to / CHECKPOINT_DIR))
        .queryName(f"export_{spec.topic}".replace(".", "_").replace("-", "_"))
    )
    if spec.stream:
        writer = writer.trigger(processingTime=f"{spec.trigger_seconds} seconds")
    else:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    seen: set[Any] = set()
    try:
        while not query.awaitTermination(PROGRESS_EVERY_S):
            _report_batches(query, seen, progress)
        _report_batches(query, seen, progress)
    finally:
        if query.isActive:
            query.stop()
    rows = table_rows(spark, spec.to) - before
    batches = len({p.get("batchId") for p in query.recentProgress if p.get("numInputRows", 0)})
    return ExportResult(rows, batches, spec.to)
