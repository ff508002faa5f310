"""The broker harness (:class:`logtrove.testing.BrokerProcess`) leaves no process behind
when a start fails: a fixture whose broker does not answer in time raises, its ``with``
never reaches ``__exit__``, and a broker left running would hold a port, a data directory
and CPU for the rest of the session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logtrove.testing import BrokerProcess, free_port


class NeverReady(BrokerProcess):
    """A real broker whose readiness check never passes, with a short bound."""

    start_timeout_s = 2
    pids: list[int]

    def ready(self) -> bool:
        assert self.proc is not None
        self.pids.append(self.proc.pid)
        return False


def test_a_broker_that_does_not_answer_in_time_is_stopped(tmp_path: Path) -> None:
    broker = NeverReady(tmp_path / "data", free_port())
    broker.pids = []
    with pytest.raises(RuntimeError, match="did not start in 2 s"):
        broker.start()
    assert broker.pids, "the readiness check never ran"
    assert broker.proc is None and not broker.alive()
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(broker.pids[0], 0)
