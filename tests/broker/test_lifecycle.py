"""Starting and stopping ``logtrove serve``: SIGTERM / SIGINT shut down cleanly (exit 0,
clean-shutdown marker written), a second broker on the same data directory is refused."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from tests.broker import clients
from tests.broker.conftest import SERVE, BrokerProcess, free_port

from logtrove.storage.datadir import CLEAN_SHUTDOWN_FILE


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
