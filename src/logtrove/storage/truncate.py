"""A follower's truncation of its log end (Kafka's ``Log.truncateTo``).

When the leader's log diverged from a follower's (an unclean failover: the new leader
had less and wrote on), the follower drops its suffix from the first batch that holds an
offset ≥ ``offset`` and fetches again from there. Whole batches only, so the new log end
is the base offset of that batch (≤ ``offset``)::

    before   [ S0 ............ ][ S1 ...... ✂ ..... ][ S2 ........ ][ active ]
    after    [ S0 ............ ][ S1' ..... ]  [ new active, empty, at the cut ]

Offsets and files stay what every reader already handles, because a truncation is made
of the two moves retention and the cleaner make, each a structural method of the log's
:class:`~logtrove.storage.locallog.LocalLog` run under its lock:

1. every segment wholly at or past the cut is unlisted and renamed ``.deleted`` (its
   derived files with it), newest first, and the directory fsynced;
2. the segment holding the cut is replaced by a copy of its batches before the cut,
   through the cleaner's swap (:mod:`logtrove.storage.swap`): a new file under the old
   name, so the indexer (which follows a segment by inode) builds the copy's ``.keyidx``,
   ``.tagidx`` and ``.skip`` afresh, and readers reopen it;
3. a new empty active segment starts at the cut.

A crash between the steps leaves a log that ends earlier than before and has no hole
(step 1 is durable before step 2 begins, and the swap is crash-safe), which the follower
checks and truncates again after its restart. :attr:`PartitionLog.truncations` counts
truncations, so that caches of what a log holds (the transaction state of a followed
partition, the epoch entries of :mod:`logtrove.storage.epochs`) start their walks afresh.

Truncating below the log start empties the log, which restarts at ``offset``.
"""

from __future__ import annotations

from logtrove.storage.checkpoint import fsync_dir
from logtrove.storage.errors import ReadOnlyError
from logtrove.storage.log import PartitionLog
from logtrove.storage.segment import Segment
from logtrove.storage.store import Storage


def truncate_log(plog: PartitionLog, offset: int) -> int:
    """Drop every batch holding an offset ≥ ``offset`` (module doc); returns the new log
    end offset. Nothing happens when ``offset`` is at or past the log end."""
    if plog.read_only:
        raise ReadOnlyError(f"{plog.tp} is open read-only")
    with plog.lock:
        if offset >= plog.log_end_offset:
            return plog.log_end_offset
        segments = plog.segments
        start = plog.log_start_offset
        cut_seg: Segment | None = None
        cut_pos = 0
        end = offset  # the new log end when everything goes
        for seg in reversed(segments):
            if seg.base_offset >= offset:
                continue
            found = seg.find(offset)
            if found is not None:
                cut_seg, cut_pos, end = seg, found[0], found[1].base_offset
            break
        doomed = [s for s in segments if s.base_offset >= offset or (s is cut_seg and cut_pos == 0)]
        for seg in reversed(doomed):
            plog.delete_segment(seg)
        fsync_dir(plog.directory)
        if cut_seg is not None and cut_pos > 0:
            _replace_with_prefix(plog, cut_seg, cut_pos)
        remaining = plog.segments
        if remaining:
            end = remaining[-1].next_offset
        elif offset < start:  # below the log start: restart there (Kafka's truncateFullyAndStartAt)
            end = offset
        plog.start_segment(end)
        plog.log_start_offset = min(start, end)
        plog.recovery_point = min(plog.recovery_point, end)
        plog.truncations += 1
        return end


def _replace_with_prefix(plog: PartitionLog, seg: Segment, cut_pos: int) -> None:
    """Swap in a copy of ``seg``'s batches before byte ``cut_pos`` for ``seg``."""
    copy = plog.new_cleaned_segment(seg.base_offset)
    for pos, header in seg.batches(0, cut_pos):
        copy.append(header, seg.read(pos, header.size))
    copy.seal()
    copy.flush()
    plog.replace_segment(seg, copy)


def truncate_partition(storage: Storage, topic: str, partition: int, offset: int) -> int:
    """:func:`truncate_log` of one partition of ``storage``, its recovery point and log
    start checkpointed at once (they may have moved back with the log end)."""
    end = truncate_log(storage.log(topic, partition), offset)
    storage.write_checkpoints()
    return end
