"""Injected time.

Retention, segment rolling, compaction horizons and lag all depend on "now". They take a
:class:`Clock` so that tests can move time without sleeping (see ``logtrove.testing``).
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of wall-clock time in milliseconds since the epoch."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The real wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


SYSTEM_CLOCK: Clock = SystemClock()
