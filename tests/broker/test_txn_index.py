"""The per-segment transaction files through a real broker and real clients: confluent-kafka
transactional producers that commit and abort across segment rolls leave one ``.txnindex``
entry per abort and a snapshot per segment; after a restart a read_committed consumer
sees exactly the committed records."""

from __future__ import annotations

import signal
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker.txn_clients import READ_COMMITTED, READ_UNCOMMITTED, read_values, txn_producer

from logtrove.storage import Storage
from logtrove.storage.txnindex import SNAPSHOT_SUFFIX, read_txn_index
from logtrove.testing import BrokerProcess, free_port, wait_until


def test_aborts_are_indexed_per_segment_and_survive_restarts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    committed: list[bytes] = []
    every: list[bytes] = []
    with BrokerProcess(data, free_port()) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("txi", 1, 1, config={"segment.bytes": "4096"})])["txi"].result(10)
        producer = txn_producer(broker.bootstrap, "txi-tx")
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
        assert read_values(broker.bootstrap, "txi", READ_COMMITTED) == committed
        broker.stop(signal.SIGKILL)  # unclean: the files of the recovered segments are rebuilt
        broker.start()
        assert read_values(broker.bootstrap, "txi", READ_COMMITTED) == committed
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
        assert read_values(broker.bootstrap, "txi", READ_COMMITTED) == committed
        assert read_values(broker.bootstrap, "txi", READ_UNCOMMITTED) == every


def test_the_brokers_cleaner_removes_aborted_records_and_spares_the_open_transaction(tmp_path: Path) -> None:
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0",
    }
    with BrokerProcess(tmp_path / "data", free_port(), "--cleaner-interval-s", "0.2") as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("ctx", 1, 1, config=configs)])["ctx"].result(10)
        latest: dict[bytes, bytes] = {}
        aborted: set[bytes] = set()
        producer = txn_producer(bootstrap, "ctx-tx")
        for n in range(30):
            producer.begin_transaction()
            written = {
                b"k%d" % (n * 7 % 11 + i): b"k%d=%d" % (n * 7 % 11 + i, n) + b"." * 150 for i in range(3)
            }
            for key, value in written.items():
                producer.produce("ctx", key=key, value=value)
            producer.flush(10)
            if n % 3 == 2:
                producer.abort_transaction(10)
                aborted.update(written.values())
            else:
                producer.commit_transaction(10)
                latest.update(written)
        still_open = txn_producer(bootstrap, "ctx-open")
        still_open.begin_transaction()
        still_open.produce("ctx", key=b"k1", value=b"k1=open")
        still_open.flush(10)
        filler = txn_producer(bootstrap, "ctx-filler")
        filler.begin_transaction()
        for i in range(40):  # after the open transaction: segments the cleaner must not touch
            filler.produce("ctx", key=b"k2", value=b"k2=late%d" % i + b"." * 150)
        filler.commit_transaction(10)

        reads: list[list[bytes]] = []

        def without_aborted() -> list[bytes] | None:
            reads.append(read_values(bootstrap, "ctx", READ_UNCOMMITTED, settle_s=0.5 if reads else 1.5))
            return None if aborted & set(reads[-1]) else reads[-1]

        seen = wait_until(
            without_aborted,
            60,
            interval_s=0.5,
            what=lambda: f"the cleaner removing the aborted records ({len(aborted & set(reads[-1]))} left)",
        )
        assert not aborted & set(seen)  # the cleaner removed every aborted record
        assert b"k1=open" in seen and sum(v.startswith(b"k2=late") for v in seen) == 40  # above the LSO
        assert len(seen) < 30 * 3 + 41  # and it did compact below it
        committed = read_values(bootstrap, "ctx", READ_COMMITTED)
        assert {v.split(b"=")[0]: v for v in committed} == latest  # nothing past the open one
        still_open.commit_transaction(10)
        after = read_values(bootstrap, "ctx", READ_COMMITTED)
        by_key = {v.split(b"=")[0]: v for v in after}
        assert by_key == {**latest, b"k1": b"k1=open", b"k2": b"k2=late39" + b"." * 150}
