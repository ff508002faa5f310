"""Direct mode: an executor reads its offset range straight from the segment files.

The data directory is opened read-only, so this is safe while a broker appends and the
cleaner swaps segments (storage tolerates both). Records come back in offset order.

Filters (``key``, ``id``, ``tag``, ``contains``) are tested first against a batch's
decompressed payload — a record can only match if the wanted bytes occur in it — and only
batches that pass are parsed; every hit is then verified on the parsed record, so there
are no false hits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from logtrove.records import BatchHeader, Record, iter_records
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE
from logtrove.records.record import batch_payload
from logtrove.spark.columns import BATCH_ROWS, ColumnBuffer, decode_batch_into
from logtrove.spark.options import RecordFilter
from logtrove.spark.ranges import OffsetRange
from logtrove.storage import Storage, TopicConfig


def _needles(flt: RecordFilter) -> list[bytes]:
    """Byte strings every matching record's encoding must contain."""
    out = [flt.key, flt.contains]
    out += [
        flt.id.encode() if flt.id is not None else None,
        flt.tag.encode() if flt.tag is not None else None,
    ]
    return [n for n in out if n]


def record_matches(record: Record, flt: RecordFilter, config: TopicConfig) -> bool:
    """The exact test behind every filter option (no false hits)."""
    if flt.key is not None and record.key != flt.key:
        return False
    if flt.id is not None and record.header(config.message_id_header) != flt.id.encode():
        return False
    if flt.tag is not None and record.header(config.message_tag_header) != flt.tag.encode():
        return False
    return flt.contains is None or (record.value is not None and flt.contains in record.value)


def iter_range_records(
    storage: Storage, rng: OffsetRange, flt: RecordFilter
) -> Iterator[tuple[BatchHeader, Record]]:
    """(batch header, record) for each record of ``rng`` that passes ``flt``."""
    log = storage.log(rng.topic, rng.partition)
    config = storage.topic(rng.topic).config
    needles = _needles(flt)
    for header, data in log.batches(rng.start, rng.end):
        if header.is_control:
            continue
        if needles:
            payload = bytes(batch_payload(data, header))
            if not all(n in payload for n in needles):
                continue
        for record in iter_records(data, 0, header):
            if record.offset < rng.start:
                continue
            if record.offset >= rng.end:
                return
            if flt.empty or record_matches(record, flt, config):
                yield header, record


def read_range(path: str, rng: OffsetRange, flt: RecordFilter, include_headers: bool) -> Iterator[Any]:
    """Arrow record batches of the rows of ``rng`` (executor side)."""
    storage = Storage.open(path, read_only=True)
    try:
        config = storage.topic(rng.topic).config
        buf = ColumnBuffer(
            rng.topic, rng.partition, config.message_id_header, config.message_tag_header, include_headers
        )
        if flt.empty:
            for header, data in storage.log(rng.topic, rng.partition).batches(rng.start, rng.end):
                if not header.is_control:
                    decode_batch_into(buf, data, header, rng.start, rng.end)
                if len(buf) >= BATCH_ROWS:
                    yield buf.take_batch()
        else:
            for header, record in iter_range_records(storage, rng, flt):
                buf.add(record, bool(header.attributes & ATTR_TIMESTAMP_TYPE))
                if len(buf) >= BATCH_ROWS:
                    yield buf.take_batch()
        if len(buf):
            yield buf.take_batch()
    finally:
        storage.close()
