"""Which segments retention and DeleteRecords remove from the left of a partition's log.

::

    log start                                                         log end
        ▼                                                                ▼
        ┌────────────┬────────────┬────────────┬─────────────────────────┐
        │ segment 0  │ segment 1  │ segment 2  │ active (never removed)  │
        └────────────┴────────────┴────────────┴─────────────────────────┘
        ◀── removed while expired or oversized ──▶  stop at the first kept

* ``retention.ms``: a segment whose newest record (its ``max_timestamp``) is older than
  ``retention.ms`` is expired; a segment without timestamps never is.
* ``retention.bytes``: a segment goes while what would remain still holds at least
  ``retention.bytes``.
* DeleteRecords (and a follower's move of its log start to the leader's) moves the log
  start offset forward to a requested offset in ``[0, log end]``; the segments that end
  at or below it go.

Segments go oldest first and never past the first one kept, so the log stays one run of
offsets. The log start offset moves only forward. These functions only choose: the
:class:`~logtrove.storage.log.PartitionLog` removes the segments under its lock
(:meth:`~logtrove.storage.locallog.LocalLog.delete_segment`: their files are renamed
``.deleted`` and unlinked after ``file.delete.delay.ms``).
"""

from __future__ import annotations

from logtrove.storage.config import TopicConfig
from logtrove.storage.errors import OffsetOutOfRangeError
from logtrove.storage.segment import Segment


def retention_victims(segments: list[Segment], config: TopicConfig, now_ms: int) -> list[Segment]:
    """The oldest sealed ``segments`` that ``retention.ms`` or ``retention.bytes`` remove
    at ``now_ms`` (module doc), oldest first."""
    total = sum(s.size for s in segments)
    victims: list[Segment] = []
    for seg in segments[:-1]:
        expired = (
            config.retention_ms >= 0
            and seg.max_timestamp >= 0
            and now_ms - seg.max_timestamp > config.retention_ms
        )
        oversized = config.retention_bytes >= 0 and total - seg.size >= config.retention_bytes
        if not (expired or oversized):
            break
        total -= seg.size
        victims.append(seg)
    return victims


def below_log_start(segments: list[Segment], log_start_offset: int) -> list[Segment]:
    """The sealed ``segments`` whose every offset is below ``log_start_offset``."""
    return [seg for seg in segments[:-1] if seg.next_offset <= log_start_offset]


def check_delete_before(offset: int, log_start_offset: int, log_end_offset: int, name: str) -> None:
    """DeleteRecords may move the log start of ``name`` to an offset in ``[0, log end]``
    only; otherwise :class:`OffsetOutOfRangeError`."""
    if offset > log_end_offset or offset < 0:
        raise OffsetOutOfRangeError(
            f"cannot delete records before {offset}: the log of {name} ends at {log_end_offset}",
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
        )
