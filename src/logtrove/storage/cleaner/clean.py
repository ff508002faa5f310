"""One cleaning round of a compacted partition: the algorithm, without scheduling.

Sections of a partition log, as in Kafka's LogCleaner::

    log start        first dirty                 first uncleanable       log end
       │ clean section   │        dirty section         │ too young / active │
       ├─────────────────┼──────────────────────────────┼────────────────────┤
                         └── map covers [first dirty, end) ──┘  end ≤ first uncleanable

1. **Map.** Read the dirty section in offset order and record, per key digest, the
   latest offset (:class:`OffsetMap`, a fixed memory budget). When the map is full the
   round covers only ``[first dirty, end)`` where ``end`` is the first record that did not
   fit: partial progress, never a failure because a segment has too many keys
   (KAFKA-3894). A precomputed map (:class:`OffsetMapFile`, e.g. from Spark) may be
   given instead; it covers ``[0, map.end_offset)``.
2. **Copy.** Segments below ``end`` are grouped (each group's original size at most
   ``segment.bytes``) and each group is recopied into one ``.cleaned`` segment, keeping
   record ``r`` when ``r.offset >= end``, or when ``r`` has a key, no later offset for that
   key is in the map, and ``r`` is not a tombstone past its delete horizon. Keyless
   records are dropped. Batches whose records all survive are copied byte for byte;
   others are re-encoded with the same base offset, offset span, compression and
   producer fields, so **offsets never change**. Transactions (:mod:`.txn`): the round
   ends at the last stable offset, aborted data is neither mapped nor copied, and a
   marker is kept until no data of its transaction remains and then its delete horizon.
3. **Tombstones.** A tombstone (null value) that survives its first cleaning gets a delete
   horizon ``now + delete.retention.ms`` (batch attribute bit 6, as in Kafka's KIP-534);
   the first cleaning after the horizon drops it.
4. **Swap.** Each ``.cleaned`` segment replaces its group atomically
   (:mod:`logtrove.storage.swap`). The new first dirty offset is ``end``.

Both passes read segments in large chunks and hand each batch's records section to
:mod:`.passes` (compiled when built): no ``Record`` objects and no per-record Python.
Compressed batches are decompressed here first, within the topic's bound.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import crc32c

from logtrove.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    read_header,
)
from logtrove.records.batch import (
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CRC_START,
    HEADER,
)
from logtrove.records.compression import compress, decompressed_limit
from logtrove.records.record import batch_payload
from logtrove.storage.cleaner.offset_map import OffsetLookup, OffsetMap
from logtrove.storage.cleaner.passes import Filtered, filter_records
from logtrove.storage.cleaner.txn import TxnCleaning, Verdict, uncleanable_from
from logtrove.storage.derived.indexer import build_segment_indexes
from logtrove.storage.log import PartitionLog
from logtrove.storage.segment import Segment
from logtrove.storage.swap import Fault
from logtrove.storage.txnindex import write_txn_index

Progress = Callable[[str, int, int], None]
"""Called as ``progress(phase, done_bytes, total_bytes)``; phases are "map" and "copy"."""

_RELATIVE_OFFSET_LIMIT = 2**32 - 1
_READ_CHUNK = 1024 * 1024  # bytes read from a segment at a time by both passes
_CRC = struct.Struct(">I")


@dataclass(frozen=True)
class CleanStats:
    """What one round did."""

    first_dirty_before: int
    first_dirty_after: int
    first_uncleanable: int
    keys_in_map: int
    map_full: bool
    segments_cleaned: int
    bytes_before: int
    bytes_after: int
    records_read: int
    records_kept: int
    records_removed: int
    tombstones_removed: int
    live_keys_kept: int
    markers_removed: int = 0  # transaction markers dropped past their delete horizon

    @property
    def made_progress(self) -> bool:
        return self.first_dirty_after > self.first_dirty_before or self.bytes_after < self.bytes_before


def first_uncleanable_offset(log: PartitionLog, now_ms: int) -> int:
    """The active segment, the first segment holding a record younger than
    ``min.compaction.lag.ms``, or the last stable offset (an open transaction's records
    are never cleaned), whichever comes first."""
    segments = log.segments
    active = segments[-1].base_offset
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for seg in segments[:-1]:
            if seg.max_timestamp > now_ms - lag:
                active = min(seg.base_offset, active)
                break
    return min(active, uncleanable_from(log))


def dirty_ratio(log: PartitionLog, first_dirty: int, now_ms: int) -> float:
    """Dirty bytes over cleanable bytes, at segment granularity."""
    limit = first_uncleanable_offset(log, now_ms)
    clean = dirty = 0
    for seg in log.segments:
        if seg.base_offset >= limit:
            break
        if seg.next_offset <= first_dirty:
            clean += seg.size
        else:
            dirty += seg.size
    total = clean + dirty
    return dirty / total if total else 0.0


def build_offset_map(
    log: PartitionLog,
    first_dirty: int,
    limit: int,
    budget_bytes: int,
    progress: Progress | None = None,
    skip: Callable[[BatchHeader], bool] | None = None,
) -> OffsetMap:
    """Map the dirty section ``[first_dirty, limit)`` until the budget is full; the
    returned map's ``end_offset`` is the first offset it did not cover. Batches ``skip``
    names (control batches and aborted data: :meth:`TxnCleaning.skips_in_map`) are not
    mapped."""
    offset_map = OffsetMap(budget_bytes)
    offset_map.end_offset = min(first_dirty, limit)
    if first_dirty >= limit:
        return offset_map
    total = sum(s.size for s in log.segments if s.base_offset < limit and s.next_offset > first_dirty)
    done = 0
    bound = decompressed_limit(log.config.max_message_bytes)
    for header, data in _dirty_batches(log, first_dirty, limit):
        if skip is not None and skip(header):
            done += header.size
            continue
        payload = batch_payload(data, header, 0, bound)
        try:
            full_at = offset_map.put_records(
                payload, header.base_offset, header.record_count, first_dirty, limit
            )
        except ValueError as exc:
            raise CorruptRecordError(f"batch at offset {header.base_offset}: {exc}") from exc
        if full_at is not None:
            offset_map.end_offset = full_at
            return offset_map
        done += header.size
        if progress:
            progress("map", done, total)
    offset_map.end_offset = limit
    return offset_map


def _dirty_batches(
    log: PartitionLog, first_dirty: int, limit: int
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The batches holding offsets in ``[first_dirty, limit)``, in offset order."""
    for seg in log.segments:
        if seg.next_offset <= first_dirty:
            continue
        if seg.base_offset >= limit:
            return
        start = 0
        if seg.base_offset < first_dirty:
            found = seg.find(first_dirty)
            if found is None:
                continue
            start = found[0]
        for _position, header, data in read_batches(seg, start):
            if header.base_offset >= limit:
                return
            yield header, data


def read_batches(seg: Segment, start: int = 0) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """``(position, header, bytes)`` of each whole batch of ``seg`` from ``start``, walked
    :data:`_READ_CHUNK` bytes at a time (one ``pread`` for many small batches); the walk
    stops where :meth:`Segment.batches` stops."""
    for span in seg.spans(start, first_read=_READ_CHUNK, max_read=_READ_CHUNK):
        yield span.position, span.header, memoryview(span.buffer)[span.at : span.at + span.header.size]


def group_segments(segments: list[Segment], max_bytes: int) -> list[list[Segment]]:
    """Consecutive groups whose original sizes add up to at most ``max_bytes`` (a single
    larger segment forms its own group) and whose offsets fit one segment's index."""
    groups: list[list[Segment]] = []
    for seg in segments:
        current = groups[-1] if groups else None
        if (
            current
            and sum(s.size for s in current) + seg.size <= max_bytes
            and seg.next_offset - current[0].base_offset <= _RELATIVE_OFFSET_LIMIT
        ):
            current.append(seg)
        else:
            groups.append([seg])
    return groups


class _Copier:
    """Recopies a group of segments into one ``.cleaned`` segment (step 2 and 3)."""

    def __init__(
        self,
        lookup: OffsetLookup,
        end: int,
        now_ms: int,
        delete_retention_ms: int,
        decompressed: int,
        txn: TxnCleaning,
    ) -> None:
        self.txn = txn
        self.table = lookup.table
        self.layout = lookup.layout
        self.end = end
        self.now = now_ms
        self.horizon = now_ms + delete_retention_ms
        self.decompressed = decompressed  # bytes a batch may decompress to (the topic's limit)
        self.read = self.kept = self.tombstones_removed = self.live_keys = 0

    def copy_batch(self, header: BatchHeader, data: bytes | memoryview, out: Segment) -> None:
        if header.base_offset >= self.end:
            out.append(header, data)
            return
        if header.is_control:
            verdict = self.txn.marker(header)
            if verdict is Verdict.STAMP:
                stamped = self.txn.stamped(header, data)
                out.append(read_header(stamped), stamped)
            elif verdict is Verdict.KEEP:
                out.append(header, data)
            return
        if self.txn.drops_data(header):
            self.read += header.record_count
            return
        append_ts = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
        try:
            result = filter_records(
                self.table,
                self.layout,
                batch_payload(data, header, 0, self.decompressed),
                header.base_offset,
                header.record_count,
                header.base_timestamp,
                append_ts,
                header.delete_horizon_ms,
                self.now,
                self.horizon,
                self.end,
            )
        except ValueError as exc:
            raise CorruptRecordError(f"batch at offset {header.base_offset}: {exc}") from exc
        self.read += result.read
        self.kept += result.kept
        self.tombstones_removed += result.tombstones_removed
        self.live_keys += result.live
        if result.kept == 0:
            return
        if result.records is None:
            out.append(header, data)  # nothing to drop: the batch is copied byte for byte
            return
        out.append(*rebuild_batch(header, result))


def rebuild_batch(header: BatchHeader, result: Filtered) -> tuple[BatchHeader, bytes]:
    """The batch ``header`` heads, holding only ``result.records``: same base offset,
    offset span, compression, producer fields and leader epoch; new base and max
    timestamps, record count, horizon attribute and CRC32C (as ``build_batch`` makes them)."""
    assert result.records is not None
    payload = compress(header.compression, result.records)
    attributes = int(header.compression) | header.attributes & (ATTR_TIMESTAMP_TYPE | ATTR_TRANSACTIONAL)
    if result.horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
    rebuilt = header._replace(
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(payload),
        crc=0,
        attributes=attributes,
        base_timestamp=result.base_ts,
        max_timestamp=result.max_ts,
        record_count=result.kept,
    )
    head = bytearray(HEADER.pack(*rebuilt))
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(head)[CRC_START:]))
    _CRC.pack_into(head, 17, crc)
    return rebuilt._replace(crc=crc), bytes(head) + payload


def clean_partition(
    log: PartitionLog,
    *,
    first_dirty: int,
    now_ms: int,
    budget_bytes: int,
    offset_map: OffsetLookup | None = None,
    progress: Progress | None = None,
    fault: Fault | None = None,
) -> CleanStats:
    """Run one round (see the module docstring) and return what it did.

    ``first_dirty`` comes from the cleaner checkpoint (0 at first). With ``offset_map``
    the map phase is skipped and the precomputed map is used.
    """
    limit = first_uncleanable_offset(log, now_ms)
    first_dirty = max(first_dirty, log.log_start_offset)
    if first_dirty > limit:
        first_dirty = log.log_start_offset
    txn = TxnCleaning.of(log, now_ms)
    if offset_map is None:
        built = build_offset_map(log, first_dirty, limit, budget_bytes, progress, txn.skips_in_map)
        lookup: OffsetLookup = built
        keys, full, end = built.size, built.end_offset < limit, built.end_offset
    else:
        lookup = offset_map
        end = min(offset_map.end_offset, limit)
        keys, full = -1, False
    candidates = [s for s in log.segments[:-1] if s.base_offset < end]
    copier = _Copier(
        lookup,
        end,
        now_ms,
        log.config.delete_retention_ms,
        decompressed_limit(log.config.max_message_bytes),
        txn,
    )
    before = after = 0
    total = sum(s.size for s in candidates)
    for group in group_segments(candidates, log.config.segment_bytes):
        out = log.new_cleaned_segment(group[0].base_offset)
        try:
            for seg in group:
                for position, header, data in read_batches(seg):
                    copier.copy_batch(header, data, out)
                    if progress:
                        progress("copy", before + position + header.size, total)
                before += seg.size
            build_segment_indexes(out, log.config)  # key, tag and skip files travel with it
            entries = txn.kept_entries(group)
            if entries is not None:
                write_txn_index(out, entries)
        except BaseException:
            out.delete_files()  # nothing swapped yet: the old segments are intact
            raise
        after += out.size
        log.replace_segments(group, out, fault)
    return CleanStats(
        first_dirty_before=first_dirty,
        first_dirty_after=max(end, first_dirty),
        first_uncleanable=limit,
        keys_in_map=keys,
        map_full=full,
        segments_cleaned=len(candidates),
        bytes_before=before,
        bytes_after=after,
        records_read=copier.read,
        records_kept=copier.kept,
        records_removed=copier.read - copier.kept,
        tombstones_removed=copier.tombstones_removed,
        live_keys_kept=copier.live_keys,
        markers_removed=txn.markers_removed,
    )
