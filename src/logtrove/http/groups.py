"""Where the API reads consumer groups and lag from.

Lag is computed by :class:`~logtrove.groups.lag.LagMonitor` (DESIGN.md §5: log end −
committed, time lag, exact tag-aware lag from ``.tagidx``), which replays
``__consumer_offsets`` incrementally and works on a read-only opening while a broker
writes. :class:`GroupsSource` serialises access to it (it is not thread-safe and the API
answers from a thread pool) and refreshes it at most every ``reload_interval_s``.

A broker can add live group states (members, rebalancing) with ``states``: a callable
that must be safe to call from the API's threads (see ``server.next_to_broker``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from logtrove.groups.lag import GroupLag, LagMonitor
from logtrove.groups.subscriptions import TagSubscription
from logtrove.storage import Storage


@dataclass(frozen=True)
class GroupState:
    """What a broker knows of a live group."""

    state: str
    members: int
    member_list: tuple[dict[str, object], ...] = ()
    type: str = "classic"  # the group's protocol: classic, or consumer (KIP-848)


GroupStates = Callable[[], dict[str, GroupState]]


class GroupsSource:
    """Lag and subscriptions of every group (through a lock), plus optional live states."""

    def __init__(
        self, storage: Storage, *, states: GroupStates | None = None, reload_interval_s: float = 1.0
    ) -> None:
        self.storage = storage
        self._states = states
        self._reload_interval_s = reload_interval_s
        self._lock = threading.Lock()
        self._monitor = LagMonitor(storage, clock=storage.clock)
        self._refreshed_at: float | None = None

    def _fresh(self) -> LagMonitor:
        """The monitor, refreshed if stale; call with ``self._lock`` held."""
        now = time.monotonic()
        if self._refreshed_at is None or now - self._refreshed_at >= self._reload_interval_s:
            self._monitor.refresh()
            self._refreshed_at = time.monotonic()
        return self._monitor

    def invalidate(self) -> None:
        """Make the next question re-read ``__consumer_offsets`` (after a write)."""
        with self._lock:
            self._refreshed_at = None

    def states(self) -> dict[str, GroupState]:
        return self._states() if self._states is not None else {}

    def group_ids(self) -> list[str]:
        with self._lock:
            stored = self._fresh().groups()
        return sorted(set(stored) | set(self.states()))

    def lag(self, group: str, topic: str | None = None) -> GroupLag:
        """Lag of ``group`` (on ``topic`` only, if given); raises
        :class:`~logtrove.storage.UnknownTopicError` for an unknown ``topic``."""
        with self._lock:
            return self._fresh().group_lag(group, topic)

    def lags(self, topic: str | None = None) -> list[GroupLag]:
        """Lag of every group (those on ``topic``, if given)."""
        with self._lock:
            return self._fresh().lag(None, topic)

    def subscriptions(self, group: str) -> dict[str, TagSubscription]:
        with self._lock:
            return self._fresh().progress.subscriptions_of(group)
