"""Exactly once through crashes: a consume-transform-produce loop (``eos_copier.py``, a
confluent-kafka transactional producer committing its consumer's offsets with
``send_offsets_to_transaction``) is SIGKILLed, and so is the broker, while it copies; each
time it is started again. In the end every input appears exactly once among the output a
read_committed consumer reads."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from tests.broker.txn_clients import READ_COMMITTED, READ_UNCOMMITTED, create_topic, read_values

from logtrove.testing import BrokerProcess, WireClient, free_port, wait_until

COPIER = Path(__file__).with_name("eos_copier.py")
TOTAL = 1000


def _start_copier(bootstrap: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(COPIER), bootstrap, "eos-in", "eos-out", str(TOTAL)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _wait_for_output(port: int, more_than: int, copier: subprocess.Popen[bytes]) -> None:
    """Until the output partitions hold more than ``more_than`` offsets (records and markers),
    or the copier exited (which the caller checks); :class:`TimeoutError` after 60 s."""
    with WireClient(port) as wire:
        wait_until(
            lambda: (
                copier.poll() is not None
                or sum(int(wire.list_offsets("eos-out", p, -1).offset) for p in (0, 1)) > more_than
            ),
            60,
            what=f"more than {more_than} offsets in eos-out",
        )


@pytest.mark.slow
def test_every_input_exactly_once_through_client_and_broker_kills(tmp_path: Path) -> None:
    log = tmp_path / "copier.log"
    with BrokerProcess(tmp_path / "data", free_port()) as broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, "eos-in", 2)
        create_topic(bootstrap, "eos-out", 2)
        plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(TOTAL):
            plain.produce("eos-in", value=b"%d" % i, partition=i % 2)
        plain.flush(20)

        copier = _start_copier(bootstrap, log)
        _wait_for_output(broker.port, 150, copier)
        assert copier.poll() is None, "the copier finished before it could be killed mid-way"
        copier.send_signal(signal.SIGKILL)
        copier.wait(10)

        copier = _start_copier(bootstrap, log)
        _wait_for_output(broker.port, 500, copier)
        assert copier.poll() is None, "the copier finished before the broker could be killed mid-way"
        broker.stop(signal.SIGKILL)
        broker.start()  # the copier reconnects, or fails and is started again below

        copiers = [copier]

        def copied() -> bool:
            if copiers[-1].poll() is None:
                return False
            if copiers[-1].returncode == 0:
                return True
            copiers.append(_start_copier(bootstrap, log))
            return False

        try:
            wait_until(copied, 180, interval_s=0.5, what="a copier finishing the copy")
        except TimeoutError:  # the assertion below shows the copier's log
            copiers[-1].kill()
            copiers[-1].wait(10)
        copier = copiers[-1]
        assert copier.returncode == 0, log.read_text()

        out = read_values(bootstrap, "eos-out", READ_COMMITTED, partitions=2)
        assert sorted(out) == sorted(b"out-%d" % i for i in range(TOTAL))
        assert len(read_values(bootstrap, "eos-out", READ_UNCOMMITTED, partitions=2)) >= TOTAL
