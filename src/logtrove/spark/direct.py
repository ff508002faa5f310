"""Direct mode: an executor reads its offset range straight from the segment files.

The data directory is opened read-only, so this is safe while a broker appends and the
cleaner swaps segments (storage tolerates both). Records come back in offset order.

Full scans decode batches straight into Arrow buffers (:func:`~logtrove.spark.columns.add_batch`,
compiled when available: :mod:`logtrove.records.columnar`).
The filter options are answered by the query engine (:mod:`logtrove.query`): ``key``,
``id`` and ``tag`` through the ``.keyidx`` hash index (candidates verified against the
record, the unindexed tail scanned), ``contains`` by its content scan with the ``.skip``
token filters and raw-batch prefilter, bounded to the task's offset range. Every result
is checked again here with the column semantics (the last header of a name is the
record's id / tag), so the rows equal a ``WHERE`` over a full scan.

With ``read_committed`` (the default) a full scan skips the batches of aborted
transactions whole (a transactional batch belongs to one producer's one transaction), as
derived from the log's markers (:mod:`logtrove.storage.txnview`); the planner already
ended the ranges at the last stable offset. Control batches are never rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from logtrove.query import Contains, ContentQuery, HeaderQuery, IdQuery, KeyQuery, Query, QueryEngine
from logtrove.records import Record
from logtrove.records.columnar import new_decoder
from logtrove.spark import filtering
from logtrove.spark.columns import BATCH_BYTES, BATCH_ROWS, ColumnBuffer, add_batch, arrow_batch
from logtrove.spark.options import RecordFilter
from logtrove.spark.ranges import OffsetRange
from logtrove.storage import Storage, TopicConfig
from logtrove.storage.txnview import committed_view


def record_matches(record: Record, flt: RecordFilter, config: TopicConfig) -> bool:
    """The exact test behind every filter option (no false hits), with the topic's
    header names (:func:`logtrove.spark.filtering.record_matches`)."""
    return filtering.record_matches(record, flt, config.message_id_header, config.message_tag_header)


def _engine_query(rng: OffsetRange, flt: RecordFilter, config: TopicConfig) -> Query:
    """The most selective engine question for ``flt``: key, then id, tag, content."""
    only = (rng.partition,)
    if flt.key is not None:
        return KeyQuery(rng.topic, flt.key, partitions=only)
    if flt.id is not None:
        return IdQuery(rng.topic, flt.id, partitions=only, exhaustive=True)
    if flt.tag is not None:
        return HeaderQuery(rng.topic, config.message_tag_header, flt.tag.encode(), partitions=only)
    assert flt.contains is not None
    return ContentQuery(
        rng.topic,
        Contains(flt.contains),
        partitions=only,
        start_offset=rng.start,
        end_offset=rng.end,
        budget_bytes=None,
    )


def query_range(
    storage: Storage, rng: OffsetRange, flt: RecordFilter, *, read_committed: bool = True
) -> list[Record]:
    """Records of ``rng`` passing ``flt``, found through the query engine, in offset order."""
    config = storage.topic(rng.topic).config
    found: list[Record] = []
    engine = QueryEngine(storage, workers=1)
    for msg in engine.run(_engine_query(rng, flt, config), read_committed=read_committed):
        if rng.start <= msg.offset < rng.end:
            record = Record(msg.offset, msg.timestamp, msg.key, msg.value, msg.headers)
            if record_matches(record, flt, config):
                found.append(record)
    found.sort(key=lambda r: r.offset)
    return found


def read_range(
    path: str, rng: OffsetRange, flt: RecordFilter, include_headers: bool, *, read_committed: bool = True
) -> Iterator[Any]:
    """Arrow record batches of the rows of ``rng`` (executor side)."""
    storage = Storage.open(path, read_only=True)
    try:
        config = storage.topic(rng.topic).config
        if flt.empty:
            decoder = new_decoder(
                config.message_id_header.encode(), config.message_tag_header.encode(), include_headers
            )
            log = storage.log(rng.topic, rng.partition)
            view = committed_view(log) if read_committed else None
            for header, chunk, pos in log.batch_spans(rng.start, rng.end):
                if not header.is_control and (view is None or not view.hides_batch(header)):
                    add_batch(decoder, chunk, header, rng.start, rng.end, pos)
                if decoder.rows >= BATCH_ROWS or decoder.nbytes >= BATCH_BYTES:
                    yield arrow_batch(decoder.take(), rng.topic, rng.partition)
            if decoder.rows:
                yield arrow_batch(decoder.take(), rng.topic, rng.partition)
            return
        buf = ColumnBuffer(
            rng.topic, rng.partition, config.message_id_header, config.message_tag_header, include_headers
        )
        append_time = config.message_timestamp_type == "LogAppendTime"
        for record in query_range(storage, rng, flt, read_committed=read_committed):
            buf.add(record, append_time)
            if len(buf) >= BATCH_ROWS:
                yield buf.take_batch()
        if len(buf):
            yield buf.take_batch()
    finally:
        storage.close()
