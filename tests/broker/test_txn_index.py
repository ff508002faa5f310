"""The per-segment transaction files through a real broker and real clients: confluent-kafka
transactional producers that commit and abort across segment rolls leave one ``.txnindex``
entry per abort and a snapshot per segment; after a restart a read_committed consumer
sees exactly the committed records."""

from __future__ import annotations

import signal
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.test_transactions import READ_COMMITTED, READ_UNCOMMITTED, _producer, _values

from logtrove.storage import Storage
from logtrove.storage.txnindex import SNAPSHOT_SUFFIX, read_txn_index


def test_aborts_are_indexed_per_segment_and_survive_restarts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    committed: list[bytes] = []
    every: list[bytes] = []
    with BrokerProcess(data, free_port()) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("txi", 1, 1, config={"segment.bytes": "4096"})])["txi"].result(10)
        producer = _producer(broker.bootstrap, "txi-tx")
        for n in range(24):
            producer.begin_transaction()
            values = [b"t%02d-%02d-" % (n, i) + b"x" * 200 for i in range(4)]
            for value in values:
                producer.produce("txi", value=value)
            every.extend(values)
            producer.flush(10)  # the records reach the log before the abort (else it drops them)
            if n % 3 == 1:
                producer.abort_transaction(10)
            else:
                producer.commit_transaction(10)
                committed.extend(values)
        assert _values(broker.bootstrap, "txi", READ_COMMITTED) == committed
        broker.stop(signal.SIGKILL)  # unclean: the files of the recovered segments are rebuilt
        broker.start()
        assert _values(broker.bootstrap, "txi", READ_COMMITTED) == committed
    directory = data / "txi-0"
    snapshots = sorted(directory.glob("*" + SNAPSHOT_SUFFIX))
    with Storage.open(data, read_only=True) as storage:
        segments = storage.log("txi", 0).segments
        assert len(segments) > 4
        indexes = [read_txn_index(seg) for seg in segments]
    assert all(entries is not None for entries in indexes)
    assert sum(len(entries or []) for entries in indexes) == 8  # one per aborted transaction
    assert len(snapshots) >= len(segments) - 1
    with BrokerProcess(data, free_port()) as broker:  # a clean start from the files
        assert _values(broker.bootstrap, "txi", READ_COMMITTED) == committed
        assert _values(broker.bootstrap, "txi", READ_UNCOMMITTED) == every
