"""wait_until returns what the condition found, or says what did not happen."""

from __future__ import annotations

import pytest

from logtrove.testing import wait_until


def test_returns_the_first_true_value_of_the_check() -> None:
    answers = iter([None, 0, [], "found"])
    assert wait_until(lambda: next(answers), 5, interval_s=0) == "found"


def test_a_condition_that_never_holds_times_out_naming_it() -> None:
    with pytest.raises(TimeoutError, match=r"the topic to appear did not happen within 0\.01 s"):
        wait_until(lambda: False, 0.01, interval_s=0, what="the topic to appear")


def test_a_described_timeout_shows_the_state_when_it_expired() -> None:
    seen: list[int] = []
    with pytest.raises(TimeoutError, match=r"lag 0 \(last seen: 3\) did not happen"):
        wait_until(lambda: seen.append(3), 0.01, interval_s=0, what=lambda: f"lag 0 (last seen: {seen[-1]})")


def test_an_error_of_the_check_is_not_waited_out() -> None:
    def broken() -> bool:
        raise ConnectionRefusedError("no broker")

    with pytest.raises(ConnectionRefusedError):
        wait_until(broken, 5)
