"""Waiting for something another process or thread does, with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    check: Callable[[], T],
    timeout_s: float = 30.0,
    *,
    interval_s: float = 0.05,
    what: str | Callable[[], str] = "the condition",
) -> T:
    """Call ``check`` until it returns a true value, and return that value; raise
    :class:`TimeoutError` naming ``what`` when ``timeout_s`` passes first. ``what`` may be
    a function, called only then, so the message can show the state last seen (a log, an
    answer). An exception from ``check`` propagates: a condition that cannot be checked is
    not waited for."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            described = what() if callable(what) else what
            raise TimeoutError(f"{described} did not happen within {timeout_s:g} s")
        time.sleep(interval_s)
