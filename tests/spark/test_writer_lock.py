"""The direct writer's turn-taking on the data directory lock (no Spark session needed).

Spark runs the tasks of one write job in parallel, so each task's ``write_direct``
waits for the lock while another task holds it, and refuses at once when anything
else (a broker) does. The lock here is a real ``flock`` held by this process on a
separate descriptor, which conflicts with the writer's own open just as another
process would.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path

import pytest
from tests.spark.helpers import make_topic, stored

from logtrove.records import NewRecord
from logtrove.spark.writer import WRITER_HOLDER, write_direct
from logtrove.storage import DataDirLockedError
from logtrove.storage.datadir import LOCK_FILE


def _hold_lock(data: Path, info: dict[str, object] | None) -> int:
    """Take the writer lock as another process would, leaving ``info`` (or nothing) in it."""
    fd = os.open(data / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0)
    if info is not None:
        os.pwrite(fd, json.dumps(info).encode(), 0)
    return fd


def _release_later(fd: int, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, os.close, (fd,))
    timer.start()
    return timer


def _rows(n: int) -> list[tuple[str, int | None, NewRecord]]:
    return [("sink", 0, NewRecord(value=f"v{i}".encode(), key=None)) for i in range(n)]


@pytest.mark.parametrize(
    "info",
    [None, {"pid": 1, "command": WRITER_HOLDER}],
    ids=["holder-info-not-written-yet", "another-writer-task"],
)
def test_write_direct_waits_for_another_task_of_the_job(
    tmp_path: Path, info: dict[str, object] | None
) -> None:
    data = tmp_path / "data"
    make_topic(data, "sink", [], partitions=1)
    timer = _release_later(_hold_lock(data, info), 0.4)
    try:
        assert write_direct(str(data), _rows(5)) == 5
    finally:
        timer.join()
    assert [o for _, o, _ in stored(data, "sink")] == [0, 1, 2, 3, 4]


def test_write_direct_refuses_at_once_when_a_broker_holds_the_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data, "sink", [], partitions=1)
    fd = _hold_lock(data, {"pid": 4242, "command": "logtrove serve"})
    try:
        with pytest.raises(DataDirLockedError, match=r"pid 4242 .*use the bootstrap option"):
            write_direct(str(data), _rows(1))
    finally:
        os.close(fd)
    assert stored(data, "sink") == []
