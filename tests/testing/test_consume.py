"""consume_until reads exactly the records asked for from a real broker, or says how many
came before its deadline."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from logtrove.testing import BrokerProcess, consume_until, free_port


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with BrokerProcess(tmp_path_factory.mktemp("consume") / "data", free_port(), "--no-indexer") as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(10):
            producer.produce("ten", value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
        yield broker.bootstrap


def _reader(bootstrap: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "r", "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition("ten", 0, OFFSET_BEGINNING)])
    return consumer


def test_returns_the_records_asked_for_in_order_and_no_more(bootstrap: str) -> None:
    consumer = _reader(bootstrap)
    try:
        got = consume_until(consumer, 4)
        assert [m.value() for m in got] == [b"v0", b"v1", b"v2", b"v3"]
        assert [m.value() for m in consume_until(consumer, 6)] == [b"v%d" % i for i in range(4, 10)]
    finally:
        consumer.close()


def test_fewer_records_than_wanted_time_out_naming_the_count_reached(bootstrap: str) -> None:
    consumer = _reader(bootstrap)
    try:
        with pytest.raises(TimeoutError, match=r"11 records of 'ten' \(10 consumed\) did not happen"):
            consume_until(consumer, 11, 3, poll_s=0.2, what="records of 'ten'")
    finally:
        consumer.close()
