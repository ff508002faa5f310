"""The broker restarts its indexer child when it dies (issue 13, finding 4): SIGKILL the
child of a running broker; a new child appears, the death is logged, and records
produced afterwards get indexed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from confluent_kafka import Producer
from tests.broker.procs import indexer_children

from logtrove.storage import recorded_index_offsets
from logtrove.testing import BrokerProcess, free_port, wait_until


def produce(broker: BrokerProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, f"value-{i}".encode(), key=f"key-{i}".encode(), partition=0)
    assert producer.flush(30) == 0


@pytest.mark.slow
def test_a_killed_indexer_child_is_restarted_and_indexes_new_records(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", free_port(), "--indexer-flush-s", "0.1")
    broker.start()
    try:
        assert broker.proc is not None
        pid = broker.proc.pid
        wait_until(
            lambda: len(indexer_children(pid)) == 1, 60, interval_s=0.1, what="the indexer child starting"
        )
        [first] = indexer_children(pid)
        produce(broker, "restart", 100)
        wait_until(
            lambda: recorded_index_offsets(broker.data).get(("restart", 0)) == 100,
            60,
            interval_s=0.1,
            what="100 records being indexed",
        )

        os.kill(first, signal.SIGKILL)

        wait_until(
            lambda: [c for c in indexer_children(pid) if c != first],
            60,
            interval_s=0.1,
            what="a new indexer child starting",
        )
        produce(broker, "restart", 50)
        wait_until(
            lambda: recorded_index_offsets(broker.data).get(("restart", 0)) == 150,
            60,
            interval_s=0.1,
            what="150 records being indexed",
        )
        assert broker.alive()
        assert "was killed by signal 9; restarting it" in broker.log.read_text()
    finally:
        broker.stop()
