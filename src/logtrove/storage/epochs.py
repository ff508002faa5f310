"""Leader epochs of a partition, read from its batch headers (Kafka's leader-epoch cache).

A logtrove leader stamps its partition's leader epoch into every batch it appends (the
``partition_leader_epoch`` field, outside the CRC, written with the offset as Kafka's
leader does), and a follower copies batches unchanged, so the epochs of a log are part of
its bytes. The first batch of each epoch starts it::

    offsets   0     40    60          80
              [ epoch 0 ][ epoch 0 ][ epoch 2      ]
    entries:  (0, 0), (2, 60)       end offset of epoch 0 or 1: 60; of epoch 2: the log end

A batch with a negative epoch (a producer's -1, written before epochs were stamped) and a
batch whose epoch is below the latest one seen (a log Kafka would never write) start no
entry. A promoted leader's epoch starts at its log end before any batch carries it
(``current``).

:func:`end_offset_for` answers OffsetForLeaderEpoch (API 23) from the entries, as Kafka's
``LeaderEpochFileCache.endOffsetFor``; a follower truncates to that answer
(:mod:`logtrove.mirror.truncation`).

The entries are walked once per log (headers only, about 2.5 µs a batch) and cached;
a later question walks only what was appended since, and a truncation
(:attr:`~logtrove.storage.PartitionLog.truncations`) or a segment gone from under the walk
starts it afresh.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from logtrove.storage.log import PartitionLog

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass
class _Walk:
    truncations: int
    walked_to: int = 0
    entries: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset)


_walks: weakref.WeakKeyDictionary[PartitionLog, _Walk] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def epoch_entries(plog: PartitionLog) -> list[tuple[int, int]]:
    """(epoch, start offset) of each leader epoch in the log's batches, oldest first."""
    with _lock:
        walk = _walks.get(plog)
        if walk is None or walk.truncations != plog.truncations or walk.walked_to > plog.log_end_offset:
            walk = _walks[plog] = _Walk(plog.truncations)
        _walk(plog, walk)
        return list(walk.entries)


def latest_epoch(plog: PartitionLog) -> int:
    """The epoch of the log's newest epoch-stamped batch, or -1."""
    entries = epoch_entries(plog)
    return entries[-1][0] if entries else UNDEFINED_EPOCH


def _walk(plog: PartitionLog, walk: _Walk) -> None:
    segments = plog.segments
    begin = walk.walked_to
    for i, seg in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1].base_offset <= begin:
            continue
        found = seg.find(begin) if seg.base_offset < begin else (0, None)
        if found is None:
            continue
        for _pos, header in seg.batches(found[0]):
            if header.next_offset <= walk.walked_to:
                continue
            walk.walked_to = header.next_offset
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (not walk.entries or epoch > walk.entries[-1][0]):
                walk.entries.append((epoch, header.base_offset))


def end_offset_for(
    entries: list[tuple[int, int]], requested: int, log_end: int, current: int | None = None
) -> tuple[int, int]:
    """(epoch, end offset) for OffsetForLeaderEpoch ``requested``: the largest epoch ≤
    ``requested`` this log knows and the offset where the next one starts (the log end for
    the latest epoch). ``current`` is a leader's own epoch, which starts at the log end if
    no batch carries it yet. Kafka's answers: a requested epoch past every known one is
    ``(-1, -1)``; one below every known one is ``(requested, start of the first)``."""
    if current is not None and current >= 0 and (not entries or current > entries[-1][0]):
        entries = [*entries, (current, log_end)]
    if requested < 0 or not entries:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if entries[-1][0] == requested:
        return requested, log_end
    higher = next((e for e in entries if e[0] > requested), None)
    if higher is None:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    floor = [e for e in entries if e[0] <= requested]
    if not floor:
        return requested, higher[1]
    return floor[-1][0], higher[1]
