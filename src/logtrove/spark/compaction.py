"""Compaction at scale: key → latest offset of one partition, computed by Spark and
written as the cleaner's precomputed map file (:mod:`logtrove.storage.cleaner.offset_map`).

The job, with no Python object per key anywhere:

1. Executors read the partition through the ``logtrove`` source (split by segment) and
   digest each Arrow batch of keys at once (:func:`~logtrove.storage.cleaner.digest_keys`,
   xxh3-128, compiled).
2. One shuffle range-partitions the ``(digest, offset)`` rows by digest; each range is
   reduced to the largest offset per digest and sorted.
3. Each task writes its range as a part file of map entries
   (:func:`~logtrove.storage.cleaner.map_entries`) into ``<out>.parts/``, and the driver
   joins the parts in digest order (:func:`~logtrove.storage.cleaner.join_offset_map_parts`,
   which checks that the ranges are disjoint) into ``out``; the parts are then removed.

So the driver holds only one small row per part, whatever the key count: a 100 M-key
map (2.4 GB of entries) never passes through its memory. The tasks write to the
driver's file system, so this runs on ``local[*]`` or with a shared ``out`` directory.

The map covers ``[log start, end_offset)`` — by default up to the first offset the
cleaner may not clean (the active segment) — and is then used with
``logtrove compact TOPIC --offset-map FILE``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logtrove.storage import Storage
from logtrove.storage.cleaner import digest_keys, first_uncleanable_offset, join_offset_map_parts, map_entries

KEYS_PER_RANGE = 2_000_000
"""About how many keys one range (one part file, one task) holds: 48 MB of entries."""


@dataclass(frozen=True)
class OffsetMapResult:
    path: Path
    keys: int
    end_offset: int


def _digests(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    for batch in batches:
        keys, offsets = batch.column(0), batch.column(1)
        if keys.null_count:
            raise ValueError("null keys reached the digest step")
        large = pa.types.is_large_binary(keys.type)
        _, ends, data = keys.buffers()
        digests = digest_keys(ends, data if data is not None else b"", len(keys), large, keys.offset)
        fixed = pa.Array.from_buffers(pa.binary(16), len(keys), [None, pa.py_buffer(digests)])
        column = fixed.cast(pa.binary())  # Spark has no fixed-size binary; the cast is one C++ pass
        yield pa.RecordBatch.from_arrays([column, offsets], names=["digest", "offset"])


def _part_writer(parts: Path) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A ``mapInArrow`` function writing its task's sorted rows as one part file."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        path = parts / f"part-{task:06d}"
        written = 0
        with path.open("wb") as f:
            for batch in batches:
                digests = batch.column(0).cast(pa.binary(16))
                offsets = batch.column(1).cast(pa.int64())
                if digests.null_count or offsets.null_count:
                    raise ValueError("a null digest or offset reached the map writer")
                rows = len(digests)
                if rows == 0:
                    continue
                digest_data = digests.buffers()[1]
                offset_data = offsets.buffers()[1]
                f.write(
                    map_entries(
                        digest_data.slice(digests.offset * 16, rows * 16),
                        offset_data.slice(offsets.offset * 8, rows * 8),
                        rows,
                    )
                )
                written += rows
        yield pa.RecordBatch.from_pydict({"part": [path.name], "entries": [written]})

    return write


def build_offset_map(
    spark: Any, path: str, topic: str, partition: int, out: Path, end_offset: int | None = None
) -> OffsetMapResult:
    """Write the key → latest-offset map of ``topic``/``partition`` to ``out``."""
    from pyspark.sql import functions as sf

    with Storage.open(path, read_only=True) as storage:
        log = storage.log(topic, partition)
        end = first_uncleanable_offset(log, storage.clock.now_ms()) if end_offset is None else end_offset
        segments = len(log.segments)
        ranges = max(1, (end - log.log_start_offset) // KEYS_PER_RANGE + 1)
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
    parts = out.with_name(out.name + ".parts")
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    try:
        written = (
            df.mapInArrow(_digests, "digest binary, offset bigint")
            .repartitionByRange(ranges, "digest")
            .groupBy("digest")
            .agg(sf.max("offset").alias("offset"))
            .sortWithinPartitions("digest")
            .mapInArrow(_part_writer(parts), "part string, entries bigint")
            .collect()
        )
        files = [parts / row.part for row in written]
        count = join_offset_map_parts(out, files, end)
        if count != sum(int(row.entries) for row in written):
            raise RuntimeError(f"the map parts under {parts} changed while they were joined")
    finally:
        shutil.rmtree(parts, ignore_errors=True)
    return OffsetMapResult(out, count, end)
