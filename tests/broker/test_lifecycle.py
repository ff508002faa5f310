"""Starting and stopping ``logtrove serve``: SIGTERM / SIGINT shut down cleanly (exit 0,
clean-shutdown marker written), a second broker on the same data directory is refused."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.broker import clients

from logtrove.storage.checkpoint import INDEX_OFFSET, CheckpointFile
from logtrove.storage.datadir import CLEAN_SHUTDOWN_FILE
from logtrove.testing import SERVE, BrokerProcess, free_port, wait_until


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_shuts_down_cleanly(broker: BrokerProcess, sig: int) -> None:
    clients.produce_confluent(broker.bootstrap, "t", [(b"k", b"v", [])])
    assert broker.stop(sig) == 0
    assert (broker.data / CLEAN_SHUTDOWN_FILE).exists()
    broker.start()
    assert clients.consume_confluent(broker.bootstrap, "t", 1) == [(b"k", b"v", [])]


def test_second_broker_on_the_same_data_dir_is_refused(broker: BrokerProcess) -> None:
    args = [
        sys.executable,
        "-c",
        SERVE,
        "serve",
        "--data",
        str(broker.data),
        "--listen",
        f"127.0.0.1:{free_port()}",
    ]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert "error:" in out.stderr
    assert broker.alive()


def _children(pid: int) -> dict[int, str]:
    """Live (not zombie) child processes of ``pid``: pid → command line."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        state, ppid = text.rpartition(")")[2].split()[:2]
        if int(ppid) == pid and state != "Z":
            out[int(stat.parent.name)] = cmdline
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_the_brokers_indexer_child_indexes_and_exits_when_the_broker_is_killed(broker: BrokerProcess) -> None:
    clients.produce_confluent(broker.bootstrap, "t", [(f"k{i}".encode(), b"v", []) for i in range(50)])
    assert broker.proc is not None
    pid = broker.proc.pid
    indexers = [p for p, cmd in _children(pid).items() if "spawn" in cmd and "resource_tracker" not in cmd]
    assert len(indexers) == 1, _children(pid)
    wait_until(  # the active segment's block is written every 5 s
        lambda: list((broker.data / "t-0").glob("*.keyidx")),
        30,
        interval_s=0.2,
        what="the indexer writing the key index",
    )
    broker.stop(signal.SIGKILL)
    wait_until(
        lambda: not _alive(indexers[0]), 30, interval_s=0.1, what="an orphaned indexer stopping by itself"
    )
    broker.start()  # and a new broker (with a new indexer) starts on the same directory
    assert clients.consume_confluent(broker.bootstrap, "t", 50)[-1] == (b"k49", b"v", [])


def test_indexer_flush_interval_is_a_serve_option(tmp_path: Path) -> None:
    """``--indexer-flush-s`` sets how soon the newest records get an index block (and the
    checkpoint records them); a value below its minimum is refused with a clear error."""
    broker = BrokerProcess(tmp_path / "data", free_port(), "--indexer-flush-s", "0.2")
    broker.start()
    try:
        for burst in (1, 2):
            clients.produce_confluent(broker.bootstrap, "t", [(b"k", b"v%d" % i, []) for i in range(20)])
            checkpoint = CheckpointFile(broker.data / INDEX_OFFSET)  # replaced atomically
            end = 20 * burst
            wait_until(
                lambda: checkpoint.read().get(("t", 0)) == end,  # noqa: B023  (called before the next burst)
                30,
                interval_s=0.05,
                what=lambda: f"index offset {end} in the checkpoint (it holds {checkpoint.read()})",  # noqa: B023
            )
    finally:
        broker.stop()
    args = [sys.executable, "-c", SERVE, "serve", "--data", str(tmp_path / "other"), "--indexer-flush-s", "0"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert "--indexer-flush-s" in out.stderr
