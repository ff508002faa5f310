"""Where the API reads consumer groups from, and lag per group × topic × partition.

Committed offsets are records of ``__consumer_offsets``; :class:`GroupsSource` replays
that topic through :class:`~logtrove.groups.OffsetStore` (at most every
``reload_interval_s``), which works on a read-only opening while a broker writes. A
broker can add live group states (members, rebalancing) with ``states``: a callable
that must be safe to call from the API's threads.

Lag follows DESIGN.md §5: log end offset − committed offset; time lag is the age of
the first unconsumed record (0 when caught up); a partition the group never committed
on has no lag (``None``), never 0.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from logtrove.groups import OFFSETS_TOPIC, CommittedOffset, OffsetStore
from logtrove.storage import Storage, UnknownTopicError


@dataclass(frozen=True)
class GroupState:
    """What a broker knows of a live group."""

    state: str
    members: int
    member_list: tuple[dict[str, object], ...] = ()


GroupStates = Callable[[], dict[str, GroupState]]


@dataclass(frozen=True)
class LagRow:
    """Lag of one group on one partition."""

    topic: str
    partition: int
    log_end_offset: int
    committed: CommittedOffset | None
    lag: int | None
    time_lag_ms: int | None


class GroupsSource:
    """Committed offsets (replayed from storage) plus optional live states."""

    def __init__(
        self, storage: Storage, *, states: GroupStates | None = None, reload_interval_s: float = 1.0
    ) -> None:
        self.storage = storage
        self._states = states
        self._reload_interval_s = reload_interval_s
        self._lock = threading.Lock()
        self._loaded_at: float | None = None
        self._committed: dict[str, dict[tuple[str, int], CommittedOffset]] = {}

    def committed(self) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
        """group → (topic, partition) → commit, at most ``reload_interval_s`` old."""
        with self._lock:
            now = time.monotonic()
            if self._loaded_at is None or now - self._loaded_at >= self._reload_interval_s:
                self._committed = self._replay()
                self._loaded_at = time.monotonic()
            return self._committed

    def _replay(self) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
        if not self.storage.has_topic(OFFSETS_TOPIC):
            return {}
        store = OffsetStore(self.storage)
        store.load()
        return {group: store.for_group(group) for group in sorted(store.groups())}

    def states(self) -> dict[str, GroupState]:
        return self._states() if self._states is not None else {}

    def group_ids(self) -> list[str]:
        return sorted(set(self.committed()) | set(self.states()))

    def lag(self, group: str, topic: str | None = None) -> list[LagRow]:
        """Lag rows of ``group``: every partition of each topic it committed on."""
        commits = self.committed().get(group, {})
        topics = sorted({t for t, _ in commits} if topic is None else {topic})
        rows = []
        now = self.storage.clock.now_ms()
        for name in topics:
            try:
                partitions = self.storage.topic(name).partitions
            except UnknownTopicError:
                continue  # committed on a topic deleted since
            for p in range(partitions):
                rows.append(self._row(name, p, commits.get((name, p)), now))
        return rows

    def _row(self, topic: str, partition: int, commit: CommittedOffset | None, now: int) -> LagRow:
        log = self.storage.log(topic, partition)
        end = log.log_end_offset
        if commit is None:
            return LagRow(topic, partition, end, None, None, None)
        position = max(commit.offset, log.log_start_offset)
        lag = max(end - commit.offset, 0)
        time_lag = 0
        if lag:
            first = next(iter(log.records(position, end)), None)
            time_lag = max(now - first.timestamp, 0) if first is not None else 0
        return LagRow(topic, partition, end, commit, lag, time_lag)
