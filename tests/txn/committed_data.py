"""A topic written by confluent-kafka's transactional producers through a real broker,
and the brute force that says what a ``read_committed`` reader of it must see: the
``written`` and ``oracle`` fixtures of the readers' tests here and in ``tests/spark``.

Two producers' transactions, committed and aborted, interleaved with each other and with
plain (non-transactional) records over small segments of two partitions, then one
transaction left open and plain records after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.records import iter_records
from logtrove.storage import Storage
from logtrove.testing import HttpBrokerProcess, free_port
from logtrove.txn import MarkerType, marker_type

TOPIC = "txn-readers"


PARTITIONS = 2


Row = tuple[int, int, bytes | None, bytes | None, int]  # partition, offset, key, value, timestamp


@dataclass
class Written:
    data: Path
    broker: HttpBrokerProcess


def transactional_producer(bootstrap: str, tid: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 2})
    producer.init_transactions(15)
    return producer


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    """Committed and aborted transactions of two producers and plain records, then an open
    transaction and plain records after it (held back from read_committed readers)."""
    data = tmp_path_factory.mktemp("txnread") / "data"
    with HttpBrokerProcess(data, free_port(), free_port()) as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic(TOPIC, PARTITIONS, 1, config={"segment.bytes": "4096"})
        admin.create_topics([topic])[TOPIC].result(10)
        plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        a, b = transactional_producer(bootstrap, "reader-a"), transactional_producer(bootstrap, "reader-b")
        for round_ in range(6):
            a.begin_transaction()
            b.begin_transaction()
            for i in range(12):
                for who, producer in (("a", a), ("b", b)):
                    value = (
                        b"%s-%d-%d needle" % (who.encode(), round_, i)
                        if i % 3 == 0
                        else b"%s-%d-%d"
                        % (
                            who.encode(),
                            round_,
                            i,
                        )
                    )
                    producer.produce(TOPIC, key=b"k%d" % (i % 4), value=value, partition=i % PARTITIONS)
                if i % 4 == 0:
                    plain.produce(
                        TOPIC,
                        key=b"k%d" % (i % 4),
                        value=b"plain-%d-%d needle" % (round_, i),
                        partition=i % 2,
                    )
                    plain.flush(10)
                    a.flush(10)
                    b.flush(10)
            a.flush(10)
            b.flush(10)
            _end(a, commit=round_ % 2 == 0)
            _end(b, commit=round_ % 3 != 1)
        a.begin_transaction()  # left open: read_committed readers stop at its first offset
        for i in range(4):
            a.produce(TOPIC, key=b"k%d" % i, value=b"open-%d needle" % i, partition=i % PARTITIONS)
        a.flush(10)
        for i in range(4):
            plain.produce(TOPIC, key=b"k%d" % i, value=b"after-open-%d needle" % i, partition=i % PARTITIONS)
        plain.flush(10)
        yield Written(data, broker)


def _end(producer: Producer, *, commit: bool) -> None:
    if commit:
        producer.commit_transaction(10)
    else:
        producer.abort_transaction(10)


def brute_force(data: Path) -> tuple[list[Row], list[Row], dict[int, int]]:
    """(committed records below each partition's LSO, every data record, each partition's
    LSO), by decoding every batch and applying the markers per producer."""
    committed: list[Row] = []
    everything: list[Row] = []
    lsos: dict[int, int] = {}
    with Storage.open(data, read_only=True) as storage:
        for p in range(PARTITIONS):
            pending: dict[int, list[Row]] = {}
            decided: list[Row] = []
            first_open: dict[int, int] = {}
            for header, batch in storage.log(TOPIC, p).batches(0):
                if header.is_control:
                    kind = marker_type(batch, header)
                    rows = pending.pop(header.producer_id, [])
                    first_open.pop(header.producer_id, None)
                    if kind is MarkerType.COMMIT:
                        decided += rows
                    continue
                rows = [(p, r.offset, r.key, r.value, r.timestamp) for r in iter_records(batch, 0, header)]
                everything += rows
                if header.is_transactional:
                    pending.setdefault(header.producer_id, []).extend(rows)
                    first_open.setdefault(header.producer_id, header.base_offset)
                else:
                    decided += rows
            lso = lsos[p] = min(first_open.values(), default=storage.log(TOPIC, p).log_end_offset)
            committed += [row for row in decided if row[1] < lso]
    return sorted(committed), sorted(everything), lsos


@pytest.fixture(scope="module")
def oracle(written: Written) -> tuple[list[Row], list[Row]]:
    committed, everything, _ = brute_force(written.data)
    aborted = {r[3] for r in everything} - {r[3] for r in committed}
    assert any(v is not None and v.startswith(b"a-1-") for v in aborted)  # the data has aborted records
    assert any(v is not None and v.startswith(b"open-") for v in aborted)  # … and an open transaction
    assert any(v is not None and v.startswith(b"after-open-") for v in aborted)  # past the LSO
    assert any(v is not None and v.startswith(b"a-0-") for v in {r[3] for r in committed})
    return committed, everything
