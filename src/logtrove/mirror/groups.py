"""Mirroring consumer group commits: the source's committed offsets written locally.

Offsets are identical on the mirror (batches keep their offsets), so a commit needs no
translation (MirrorMaker 2 needs one because it re-produces): the source's
``(group, topic, partition) -> offset`` is committed as is, and ``logtrove lag`` on the
mirror equals lag on the source once the mirror has caught up. Only topics the mirror
follows are copied; only commits that changed since the last round are written (after a
restart, every commit once). Deleted commits at the source are not deleted here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.groups import CommittedOffset
from logtrove.mirror.source import Source

CommitSink = Callable[[str, dict[tuple[str, int], CommittedOffset]], None]
"""Writes one group's commits locally (``OffsetStore.commit``, or a hand-off to the
broker's event loop when the mirror runs beside a broker)."""


class GroupOffsetMirror:
    """Copies the source's group commits for the followed topics."""

    def __init__(self, source: Source, commit: CommitSink, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.source = source
        self.commit = commit
        self.clock = clock
        self._synced: dict[tuple[str, str, int], tuple[int, int, str]] = {}

    def sync(self, topics: Collection[str]) -> int:
        """One round over every group of the source; returns the commits written."""
        written = 0
        for group in self.source.groups():
            changed: dict[tuple[str, int], CommittedOffset] = {}
            for (topic, partition), value in self.source.committed(group).items():
                if topic not in topics or self._synced.get((group, topic, partition)) == value:
                    continue
                offset, epoch, metadata = value
                changed[(topic, partition)] = CommittedOffset(offset, epoch, metadata, self.clock.now_ms())
            if changed:
                self.commit(group, changed)
                for (topic, partition), c in changed.items():
                    self._synced[(group, topic, partition)] = (c.offset, c.leader_epoch, c.metadata)
                written += len(changed)
        return written
