"""What every route reaches through ``request.app.state``: the storage and its helpers.

The app never owns a data directory: ``logtrove http`` opens one read-only and
``logtrove serve`` hands over the broker's own :class:`Storage`. A read-only opening
does not see the writer's new segments and topics by itself, so :meth:`fresh_storage`
refreshes it at most every ``refresh_interval_s`` (cheap: a directory listing per
partition in use).

Appends (REST produce) go through an :data:`Appender`. By default the app appends to the
storage itself, one append at a time; a broker passes its own appender so that every
write goes through its single writer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import Request

from logtrove.clock import Clock
from logtrove.storage import AppendResult, Storage

Appender = Callable[[str, int, bytes], AppendResult]
"""``(topic, partition, batch bytes) -> AppendResult``; raises storage errors."""


@dataclass
class RequestCounter:
    """Requests served, by route template and status, for ``/metrics``."""

    counts: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, method: str, route: str, status: int) -> None:
        with self._lock:
            key = (method, route, status)
            self.counts[key] = self.counts.get(key, 0) + 1

    def snapshot(self) -> dict[tuple[str, str, int], int]:
        with self._lock:
            return dict(self.counts)


class HttpContext:
    """The shared state of one app."""

    def __init__(
        self,
        storage: Storage,
        *,
        appender: Appender | None = None,
        refresh_interval_s: float = 1.0,
        allow_writes: bool | None = None,
    ) -> None:
        self.storage = storage
        self.clock: Clock = storage.clock
        self.allow_writes = (not storage.read_only) if allow_writes is None else allow_writes
        self.started_ms = storage.clock.now_ms()
        self.requests = RequestCounter()
        self._appender = appender
        self._append_lock = threading.Lock()
        self._refresh_interval_s = refresh_interval_s
        self._refreshed_at = 0.0
        self._refresh_lock = threading.Lock()

    def fresh_storage(self) -> Storage:
        """The storage, refreshed if it is a read-only opening and the last refresh is old."""
        if self.storage.read_only:
            now = time.monotonic()
            if now - self._refreshed_at >= self._refresh_interval_s and self._refresh_lock.acquire(
                blocking=False
            ):
                try:
                    self.storage.refresh()
                    self._refreshed_at = time.monotonic()
                finally:
                    self._refresh_lock.release()
        return self.storage

    def append(self, topic: str, partition: int, batch: bytes) -> AppendResult:
        if self._appender is not None:
            return self._appender(topic, partition, batch)
        with self._append_lock:
            return self.storage.log(topic, partition).append(batch)


def get_context(request: Request) -> HttpContext:
    """FastAPI dependency: the app's :class:`HttpContext`."""
    ctx: HttpContext = request.app.state.ctx
    return ctx


def get_storage(request: Request) -> Storage:
    """FastAPI dependency: the (refreshed) storage."""
    return get_context(request).fresh_storage()
