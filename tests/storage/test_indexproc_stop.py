"""Stopping the indexer child after it was killed while it slept (SIGKILL, or the SIGTERM
that ``timeout``, systemd or a terminal sends to the whole process group): the broker's
shutdown must not hang. With the old shared ``multiprocessing.Event`` it did: setting the
Event waited for the dead sleeper to wake up, forever."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from logtrove.storage import Storage
from logtrove.storage.derived.process import IndexerProcess
from logtrove.testing import wait_until


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stop_returns_after_a_child_was_killed_while_it_slept(tmp_path: Path, sig: signal.Signals) -> None:
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic("t", 1)
    indexer = IndexerProcess(data, idle_s=0.05, restart_min_s=0.1)
    indexer.start()
    stopper = threading.Thread(target=indexer.stop, kwargs={"timeout_s": 10}, daemon=True)
    try:
        first = indexer.pid
        assert first is not None
        wait_until((data / ".indexer.lock").exists, 30, what="the child taking the indexer lock")
        time.sleep(1.0)  # the child is in its loop, sleeping on the stop signal between rounds
        os.kill(first, sig)
        wait_until(
            lambda: indexer.pid not in (None, first) and indexer.alive,
            30,
            what="the watchdog restarting the child",
        )
        time.sleep(0.5)
    finally:
        stopper.start()
        stopper.join(30)
    assert not stopper.is_alive(), "stop() hung on a child killed while it slept"
    assert not indexer.alive
