"""Following a leader's truncation as a Kafka follower does (KIP-101, KIP-279).

After an unclean failover the new leader may lack records the mirror copied from the old
one and have written others at those offsets. Leader epochs tell where the logs part: a
leader stamps its epoch into every batch (logtrove, Kafka, Redpanda), a promotion raises
it, and a mirror copies the batches with their epochs. So, before it appends again after
a start, a reconnection, a change of the partition's leader epoch in the source's
metadata, or an answer that does not fit its log end, the mirror asks the leader
OffsetForLeaderEpoch (23) for the latest epoch of its own log ``E``::

    leader answers (E, end)          → the logs agree below ``end``
    leader answers (E' < E, end)     → they agree below min(end, where E' ends here)
    leader answers (-1, -1), or the leader does not serve the API, or the log has no
        epochs (batches stamped -1)  → the epochs cannot tell (the caller falls back to
                                        comparing its last batch, :func:`tail_matches`)

and truncates its log to that offset (:mod:`logtrove.storage.truncate`, which keeps the
derived indexes and the transaction state right), then fetches from there: the records
it drops were never the new leader's, so its log ends equal to the leader's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from logtrove.mirror.follower import last_batch
from logtrove.mirror.source import Source, SourceTopic
from logtrove.storage import Storage
from logtrove.storage.epochs import end_offset_for, epoch_entries
from logtrove.storage.truncate import truncate_partition

log = logging.getLogger("logtrove.mirror")


@dataclass(frozen=True, slots=True)
class EpochVerdict:
    """What the leader's epochs said of one partition."""

    agreed_below: int  # the local log agrees with the leader's below this offset
    truncated: int  # offsets dropped from the local log end to get there (0: none)


def check_epochs(
    source: Source, storage: Storage, topic: SourceTopic, partitions: list[int]
) -> dict[int, EpochVerdict]:
    """Ask the leaders of ``partitions`` where the local logs' latest epochs end and
    truncate each log that runs past it (module doc). Partitions the epochs cannot tell
    about are left out. Raises :class:`~logtrove.mirror.source.SourceError`."""
    asks: dict[int, int] = {}
    for p in partitions:
        plog = storage.log(topic.name, p)
        last = last_batch(plog)
        if last is not None and last[0].partition_leader_epoch >= 0:
            asks[p] = last[0].partition_leader_epoch  # the latest epoch: no walk of the log to ask
    if not asks:
        return {}
    out: dict[int, EpochVerdict] = {}
    for p, (their_epoch, their_end) in source.epoch_end_offsets(topic, asks).items():
        if their_epoch < 0 or their_end < 0:
            continue
        plog = storage.log(topic.name, p)
        end = plog.log_end_offset
        target = their_end
        if their_epoch != asks[p]:  # the leader never had our latest epoch: where its own ends here
            target = min(their_end, end_offset_for(epoch_entries(plog), their_epoch, end)[1])
        if target < 0:
            continue
        dropped = 0
        if target < end:
            new_end = truncate_partition(storage, topic.name, p, target)
            dropped = end - new_end
            log.warning(
                "%s-%d: the leader's epoch %d ends at %d (ours: %d at %d); truncated the local log "
                "from %d to %d, as a Kafka follower does after an unclean leader change",
                topic.name,
                p,
                their_epoch,
                their_end,
                asks[p],
                end,
                end,
                new_end,
            )
        out[p] = EpochVerdict(min(target, plog.log_end_offset), dropped)
    return out
