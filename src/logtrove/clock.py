"""Injected time, and times and numbers as users write them.

Retention, segment rolling, compaction horizons and lag all depend on "now". They take a
:class:`Clock` so that tests can move time without sleeping (see ``logtrove.testing``).
"""

from __future__ import annotations

import datetime as dt
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


# User-written numbers and times (command-line options, URL parameters, cursors) are read
# here and nowhere else. str.isdigit() and int() accept more than ASCII: isdigit() is true
# for superscripts such as "²" that int() then rejects, and int() reads other scripts'
# digits ("٣") as numbers. Both would let odd input through one check and fail at the next.

TIME_FORMS = "use epoch milliseconds (1700000000000) or ISO-8601 (2026-11-22T10:05:00Z)"
_MAX_MS_DIGITS = 19  # 2**63 - 1 has 19 digits


def ascii_int(text: str, *, signed: bool = False) -> int | None:
    """The integer ``text`` spells in the ASCII digits 0-9 (with one leading ``-`` if
    ``signed``), or ``None`` for anything else: no spaces, signs, underscores or other
    scripts' digits."""
    digits = text[1:] if signed and text.startswith("-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    return int(text)


def parse_time(text: str, label: str | None = None) -> int:
    """Epoch milliseconds from ``1700000000000`` or an ISO-8601 time (UTC when it has no
    zone), in ``0 <= ms < 2**63``.

    Raises ValueError naming ``label`` (default ``time 'TEXT'``) and showing both forms.
    """
    shown = label or f"time {text!r}"
    raw = text.strip()
    number = raw[1:] if raw.startswith("-") else raw
    if number.isascii() and number.isdigit():
        value = int(raw) if len(number) <= _MAX_MS_DIGITS else -1
    else:
        try:
            if not raw.isascii():
                raise ValueError
            when = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"cannot read {shown}: {TIME_FORMS}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        value = int(when.timestamp() * 1000)
    if not 0 <= value < 2**63:
        raise ValueError(f"{shown} is outside the range of epoch milliseconds (0 to 2**63-1)")
    return value
