"""A clock that only moves when told to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FakeClock:
    """Manual clock: ``now_ms`` returns ``ms`` until :meth:`advance` or :meth:`set`."""

    ms: int = 1_700_000_000_000

    def now_ms(self) -> int:
        return self.ms

    def advance(self, ms: int) -> None:
        self.ms += ms

    def set(self, ms: int) -> None:
        self.ms = ms
