"""Connection admission and timeouts of the Kafka listener, with time injected."""

from __future__ import annotations

import logging

import pytest

from logtrove.broker.limits import Connection, ConnectionLimits, Phase, default_max_connections, overdue


def _conn(phase: Phase, since: float) -> Connection:
    return Connection("10.0.0.1", lambda: None, phase, since)


def test_each_phase_has_its_own_limit_and_handling_has_none() -> None:
    idle, reading, handling, writing = (
        _conn(Phase.IDLE, 0),
        _conn(Phase.READING, 0),
        _conn(Phase.HANDLING, 0),
        _conn(Phase.WRITING, 0),
    )
    conns = [idle, reading, handling, writing]
    early = dict(overdue(conns, 5, idle_s=10, read_s=2))
    assert set(early) == {reading}
    assert "--request-read-timeout-ms" in early[reading]
    late = dict(overdue(conns, 11, idle_s=10, read_s=2))
    assert set(late) == {idle, reading, writing}
    assert "--connections-max-idle-ms" in late[idle] and "writing a reply" in late[writing]


def test_entering_a_phase_restarts_its_clock() -> None:
    conn = _conn(Phase.IDLE, 0)
    conn.enter(Phase.IDLE, 9)
    assert overdue([conn], 11, idle_s=10, read_s=2) == []


def test_admission_counts_per_address_and_releases() -> None:
    now = [0.0]
    limits = ConnectionLimits(3, 2, log_interval_s=10, clock=lambda: now[0])
    assert limits.admit("a") and limits.admit("a")
    assert not limits.admit("a")  # per address
    assert limits.admit("b")
    assert not limits.admit("c")  # in total
    limits.release("a")
    assert limits.admit("c")
    assert limits.total == sum(limits.per_ip.values()) == 3


def test_refusals_are_logged_once_per_interval_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limits = ConnectionLimits(1, None, log_interval_s=10, clock=lambda: now[0])
    assert limits.admit("a")
    with caplog.at_level(logging.WARNING, logger="logtrove.broker"):
        for _ in range(100):
            limits.admit("b")
        now[0] = 11
        limits.admit("b")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refused 1 new connection(s): 1 connections open (--max-connections)",
        "refused 100 new connection(s): 1 connections open (--max-connections)",
    ]


def test_default_total_leaves_half_the_descriptors() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert default_max_connections() == max(64, soft // 2)
