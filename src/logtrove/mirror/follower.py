"""From a Fetch answer to the local log: the follower append of one partition.

A Fetch answer for offset ``O`` (the local log end) holds whole batches and, possibly,
a partial one at its end (Kafka cuts at the byte limit)::

    ┌──────────────┬──────────────┬──────────────┬─────────┐
    │ batch < O    │ batch ≥ O    │ batch ≥ O    │ partial │
    └──────────────┴──────────────┴──────────────┴─────────┘
      skipped        appended byte for byte at their     dropped (fetched
      (already here) own offsets, all or none            again next time)

The answer is split by :func:`~logtrove.records.whole_batches`: a torn tail is normal,
but a batch length or magic that no cut can produce is corruption, and the whole answer
is refused (a :class:`~logtrove.records.CorruptBatchError`; the mirror fails the
partition), never appended, and never mistaken for a torn tail to be fetched forever.

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

from logtrove.records import BatchHeader, CorruptBatchError, whole_batches
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
    partial: bool  # the answer ended with a batch cut short (a torn tail)


def append_fetched(log: PartitionLog, data: bytes) -> Appended:
    """Append the batches of one fetched answer at or after the log end (module doc).
    Raises :class:`DivergedError`, or a :class:`~logtrove.records.RecordsError` for an
    answer whose framing is corrupt (:func:`~logtrove.records.whole_batches`) or a batch
    the follower append refuses; nothing of the answer is then written."""
    split = whole_batches(data)
    follow_transactions(log)  # its rolls write the transaction files (storage.txnfollow)
    leo = log.log_end_offset
    new = 0  # the first batch the log does not have
    while new < len(split.batches) and split.batches[new][0].base_offset < leo:
        header = split.batches[new][0]
        if header.last_offset >= leo:
            raise DivergedError(
                f"{log.tp}: the leader's batch {header.base_offset}-{header.last_offset} overlaps "
                f"the local log end {leo}; the leader's log no longer matches (truncated or rewritten)"
            )
        new += 1
    if new == len(split.batches):
        return Appended(0, 0, 0, split.torn)
    pos = split.batches[new][1]
    view = memoryview(data)[pos : split.end]
    result = log.append_replicated(view)
    return Appended(result.record_count, len(split.batches) - new, split.end - pos, split.torn)


def tail_matches(last: tuple[BatchHeader, bytes], data: bytes, *, compacted: bool) -> bool | None:
    """Whether the source still has the local log's last batch, ``last`` (header, bytes),
    in a Fetch answer from its base offset: ``True`` if the answer's batch at that base
    offset is the same (byte for byte; for a compacted topic the same offset span, since
    the source's cleaner may have dropped records from it since), ``False`` if it differs
    (the source's log diverged: truncated and rewritten, or the topic recreated), ``None``
    if the answer holds no batch at that offset (nothing to compare), or cannot be framed
    (:func:`append_fetched` then refuses it).

    The mirror compares once per partition at start, after every reconnection and leader
    epoch change, before it appends again, after the leader's epochs were asked
    (:mod:`.truncation`): it is all a source without OffsetForLeaderEpoch (tansu) offers,
    and it tells a topic deleted and created again at the source, whose epochs start
    over, from the one the mirror copied."""
    header, raw = last
    try:
        split = whole_batches(data)
    except CorruptBatchError:
        return None
    for theirs, pos in split.batches:
        if theirs.base_offset == header.base_offset:
            if compacted:
                return theirs.last_offset == header.last_offset
            return data[pos : pos + theirs.size] == raw
        if theirs.base_offset > header.base_offset:
            return None
    return None


def last_batch(plog: PartitionLog) -> tuple[BatchHeader, bytes] | None:
    """The header and bytes of the log's last batch, or ``None`` for an empty log."""
    end = plog.log_end_offset
    if end <= plog.log_start_offset:
        return None
    return next(iter(plog.batches(end - 1)), None)
