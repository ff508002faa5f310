"""From a Fetch answer to the local log: the follower append of one partition.

A Fetch answer for offset ``O`` (the local log end) holds whole batches and, possibly,
a partial one at its end (Kafka cuts at the byte limit)::

    ┌──────────────┬──────────────┬──────────────┬─────────┐
    │ batch < O    │ batch ≥ O    │ batch ≥ O    │ partial │
    └──────────────┴──────────────┴──────────────┴─────────┘
      skipped        appended byte for byte at their     dropped (fetched
      (already here) own offsets, all or none            again next time)

A batch that ends below ``O`` is one the local log already has (a source may answer
from the start of the batch holding ``O``). A batch that starts below ``O`` and ends at
or after it cannot be placed without rewriting it: the leader's log no longer agrees
with the local one (the leader truncated or rewrote it: :class:`DivergedError`, which
the mirror resolves with the leader's epochs, :mod:`.truncation`). Everything else goes to
:meth:`~logtrove.storage.PartitionLog.append_replicated`, which validates each batch as
hostile input (CRC, counts, records) and writes it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from logtrove.records import LOG_OVERHEAD, BatchHeader, peek_batch_size, read_header
from logtrove.records.batch import HEADER_SIZE
from logtrove.storage import PartitionLog
from logtrove.storage.txnfollow import follow_transactions


class DivergedError(Exception):
    """The leader's batches overlap the local log end: the logs diverged."""


@dataclass(frozen=True, slots=True)
class Appended:
    """What one fetched answer added to the local log."""

    records: int
    batches: int
    bytes: int
    partial: bool  # the answer ended with a batch cut short (or held only one)


def whole_batches(data: bytes) -> tuple[int, bool]:
    """The length of the whole batches at the start of ``data``, and whether a partial
    batch follows them. Only the length field is read; validation is the log's."""
    pos = 0
    while pos < len(data):
        size = peek_batch_size(data, pos)
        if size is None or size < LOG_OVERHEAD or size > len(data) - pos:
            return pos, True
        pos += size
    return pos, False


def append_fetched(log: PartitionLog, data: bytes) -> Appended:
    """Append the batches of one fetched answer at or after the log end (module doc).
    Raises :class:`DivergedError`, or what the follower append raises for a batch that
    is not valid (nothing of the answer is then written)."""
    end, partial = whole_batches(data)
    follow_transactions(log)  # its rolls write the transaction files (storage.txnfollow)
    leo = log.log_end_offset
    pos = 0
    while pos < end:  # skip what the log already has
        if (peek_batch_size(data, pos) or 0) < HEADER_SIZE:
            break  # too short to be a batch: the follower append refuses it below
        header = read_header(data, pos)
        if header.base_offset >= leo:
            break
        if header.last_offset >= leo:
            raise DivergedError(
                f"{log.tp}: the leader's batch {header.base_offset}-{header.last_offset} overlaps "
                f"the local log end {leo}; the leader's log no longer matches (truncated or rewritten)"
            )
        pos += header.size
    if pos >= end:
        return Appended(0, 0, 0, partial)
    view = memoryview(data)[pos:end]
    result = log.append_replicated(view)
    return Appended(result.record_count, _count_batches(view), end - pos, partial)


def tail_matches(last: tuple[BatchHeader, bytes], data: bytes, *, compacted: bool) -> bool | None:
    """Whether the source still has the local log's last batch, ``last`` (header, bytes),
    in a Fetch answer from its base offset: ``True`` if the answer's batch at that base
    offset is the same (byte for byte; for a compacted topic the same offset span, since
    the source's cleaner may have dropped records from it since), ``False`` if it differs
    (the source's log diverged: truncated and rewritten, or the topic recreated), ``None``
    if the answer holds no batch at that offset (nothing to compare).

    The mirror compares once per partition at start, after every reconnection and leader
    epoch change, before it appends again, after the leader's epochs were asked
    (:mod:`.truncation`): it is all a source without OffsetForLeaderEpoch (tansu) offers,
    and it tells a topic deleted and created again at the source, whose epochs start
    over, from the one the mirror copied."""
    header, raw = last
    end, _partial = whole_batches(data)
    pos = 0
    while pos < end:
        size = peek_batch_size(data, pos) or 0
        if size < HEADER_SIZE:
            return None
        theirs = read_header(data, pos)
        if theirs.base_offset == header.base_offset:
            if compacted:
                return theirs.last_offset == header.last_offset
            return data[pos : pos + size] == raw
        if theirs.base_offset > header.base_offset:
            return None
        pos += size
    return None


def last_batch(plog: PartitionLog) -> tuple[BatchHeader, bytes] | None:
    """The header and bytes of the log's last batch, or ``None`` for an empty log."""
    end = plog.log_end_offset
    if end <= plog.log_start_offset:
        return None
    return next(iter(plog.batches(end - 1)), None)


def _count_batches(view: memoryview) -> int:
    count = pos = 0
    while pos < len(view):
        size = peek_batch_size(view, pos)
        if size is None:
            break
        pos += size
        count += 1
    return count
