"""A mirror says why it is not copying, and what to do, in ``mirror-status.json`` (and from
there in ``topics describe`` and ``/metrics``): an unreachable source while it retries
(gone once the source is back), a full disk that stops it (and a restart with space that
resumes with no gap and no duplicate)."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.mirror.helpers import DEADLINE_S, log_bytes, mirror_once

from logtrove.storage.follow import FollowStatus, read_follow_status
from logtrove.testing import SERVE, BrokerProcess, free_port, wait_until


def _wait_status(data: Path, state: str) -> FollowStatus:
    def in_state() -> FollowStatus | None:
        status = read_follow_status(data)
        return status if status is not None and status.state == state else None

    return wait_until(
        in_state,
        DEADLINE_S,
        interval_s=0.1,
        what=lambda: f"a {state} status (last: {read_follow_status(data)})",
    )


def test_an_unreachable_source_is_reported_while_retrying_and_cleared_when_it_is_back(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "m" / "data"
    data.parent.mkdir()
    args = [sys.executable, "-c", SERVE, "mirror", "--from", f"127.0.0.1:{port}", "--data", str(data)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        status = _wait_status(data, "retrying")
        assert status.problem is not None and status.problem.reason == "source_unreachable"
        assert f"127.0.0.1:{port}" in status.problem.action and "retries every" in status.problem.action
        (tmp_path / "leader").mkdir()
        with BrokerProcess(tmp_path / "leader" / "data", port, "--no-indexer"):
            status = _wait_status(data, "running")
            assert status.problem is None
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(DEADLINE_S)


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: writes fail EFBIG


def test_a_full_disk_stops_the_mirror_with_what_to_do_and_a_restart_resumes(tmp_path: Path) -> None:
    (tmp_path / "leader").mkdir()
    data = tmp_path / "m" / "data"
    data.parent.mkdir()
    with BrokerProcess(tmp_path / "leader" / "data", free_port(), "--no-indexer") as leader:
        admin = AdminClient({"bootstrap.servers": leader.bootstrap})
        admin.create_topics([NewTopic("big", 1, 1)])["big"].result(DEADLINE_S)
        producer = Producer({"bootstrap.servers": leader.bootstrap, "linger.ms": 5})
        for i in range(3000):
            producer.produce("big", key=b"k%d" % i, value=b"%d" % i + b"x" * 300)
        producer.flush(DEADLINE_S)
        args = [
            sys.executable,
            "-c",
            SERVE,
            "mirror",
            "--from",
            leader.bootstrap,
            "--data",
            str(data),
            "--once",
        ]
        out = subprocess.run(
            args,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            preexec_fn=lambda: _limited(256 << 10),
        )
        assert out.returncode == 1, out.stderr
        assert "free space in" in out.stderr
        status = read_follow_status(data)
        assert status is not None and status.state == "stopped"
        assert status.problem is not None and status.problem.reason == "disk_full"
        copied = sum(p.stat().st_size for p in (data / "big-0").glob("*.log"))
        assert 0 < copied <= 256 << 10, "it stopped at the limit, with what it had written kept"
        mirror_once(leader.bootstrap, data, "big")  # with room again: resumes where it stopped
        assert log_bytes(data, "big", 0) == log_bytes(leader.data, "big", 0)
        status = read_follow_status(data)
        assert status is not None and status.state == "stopped" and status.problem is None  # done
