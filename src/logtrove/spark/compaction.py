"""Compaction at scale: key → latest offset of one partition, computed by Spark and
written as the cleaner's precomputed map file (:mod:`logtrove.storage.cleaner.offset_map`).

Executors read the partition through the ``logtrove`` source (split by segment), hash
every key with :func:`~logtrove.storage.cleaner.key_digest` (xxh3-128), and Spark
reduces to the largest offset per digest; the driver then writes the sorted map with
:func:`~logtrove.storage.cleaner.write_offset_map_digests`. The map covers
``[log start, end_offset)`` — by default up to the first offset the cleaner may not clean
(the active segment) — and is then used with ``logtrove compact TOPIC --offset-map FILE``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logtrove.storage import Storage
from logtrove.storage.cleaner import first_uncleanable_offset, key_digest, write_offset_map_digests


@dataclass(frozen=True)
class OffsetMapResult:
    path: Path
    keys: int
    end_offset: int


def _digests(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    for batch in batches:
        keys = batch.column(0).to_pylist()
        offsets = batch.column(1)
        yield pa.RecordBatch.from_arrays(
            [pa.array([key_digest(k) for k in keys], pa.binary(16)).cast(pa.binary()), offsets],
            names=["digest", "offset"],
        )


def build_offset_map(
    spark: Any, path: str, topic: str, partition: int, out: Path, end_offset: int | None = None
) -> OffsetMapResult:
    """Write the key → latest-offset map of ``topic``/``partition`` to ``out``."""
    from pyspark.sql import functions as sf

    with Storage.open(path, read_only=True) as storage:
        log = storage.log(topic, partition)
        end = first_uncleanable_offset(log, storage.clock.now_ms()) if end_offset is None else end_offset
        segments = len(log.segments)
    df = (
        spark.read.format("logtrove")
        .option("path", path)
        .option("assign", json.dumps({topic: [partition]}))
        .option("endingOffsets", json.dumps({topic: {str(partition): end}}))
        .option("minPartitions", str(max(segments, spark.sparkContext.defaultParallelism)))
        .load()
        .where(sf.col("key").isNotNull())
        .select("key", "offset")
    )
    latest = (
        df.mapInArrow(_digests, "digest binary, offset bigint")
        .groupBy("digest")
        .agg(sf.max("offset").alias("offset"))
        .orderBy("digest")
    )
    entries = ((bytes(r.digest), int(r.offset)) for r in latest.toLocalIterator())
    count = write_offset_map_digests(out, entries, end)
    return OffsetMapResult(out, count, end)
