"""Transactions end to end, against a real broker subprocess and real clients.

confluent-kafka's transactional producer with read_committed and read_uncommitted
consumers: committed records are seen, aborted ones only by read_uncommitted; two
producers of one ``transactional.id`` fence each other; a transaction past its timeout is
aborted by the broker; ``send_offsets_to_transaction`` commits the group's offsets only
when the transaction commits; a transaction open when the broker stops is aborted when it
starts again. kafka-python's transactional producer does the basics.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from kio.schema.errors import ErrorCode
from tests.broker.txn_clients import READ_COMMITTED, READ_UNCOMMITTED, create_topic, read_values, txn_producer

from logtrove.testing import BrokerProcess, WireClient, free_port, wait_until
from logtrove.wire import ApiKey


def _committed_end(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0, as ListOffsets answers them."""
    with WireClient(int(bootstrap.rsplit(":", 1)[1])) as wire:
        ends = []
        for isolation in (1, 0):
            request = {
                "replica_id": -1,
                "isolation_level": isolation,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            }
            ends.append(wire.request(ApiKey.LIST_OFFSETS, 5, request).topics[0].partitions[0].offset)
    return ends[0], ends[1]


def test_committed_records_visible_aborted_ones_only_to_read_uncommitted(
    shared_broker: BrokerProcess,
) -> None:
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, "txn-visibility", 2)
    producer = txn_producer(bootstrap, "visibility-tx")
    for round_, commit in enumerate([True, False, True, False]):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=b"r%d-%d" % (round_, i), partition=i % 2)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.flush(10)
            producer.abort_transaction(10)
    committed = sorted(read_values(bootstrap, topic, READ_COMMITTED, partitions=2))
    everything = sorted(read_values(bootstrap, topic, READ_UNCOMMITTED, partitions=2))
    assert committed == sorted(b"r%d-%d" % (r, i) for r in (0, 2) for i in range(10))
    assert everything == sorted(b"r%d-%d" % (r, i) for r in range(4) for i in range(10))


def test_open_transaction_holds_back_read_committed_readers(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, "txn-lso")
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"plain-before")
    plain.flush(10)
    producer = txn_producer(bootstrap, "lso-tx")
    producer.begin_transaction()
    producer.produce(topic, value=b"in-txn")
    producer.flush(10)
    plain.produce(topic, value=b"plain-after")
    plain.flush(10)
    stable, high = _committed_end(bootstrap, topic)
    assert (stable, high) == (1, 3)  # the open transaction's first record stops committed readers
    assert read_values(bootstrap, topic, READ_COMMITTED, settle_s=1) == [b"plain-before"]
    producer.commit_transaction(10)
    assert read_values(bootstrap, topic, READ_COMMITTED) == [b"plain-before", b"in-txn", b"plain-after"]
    assert _committed_end(bootstrap, topic) == (4, 4)  # the marker takes offset 3


def test_second_producer_of_a_transactional_id_fences_the_first(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, "txn-zombie")
    zombie = txn_producer(bootstrap, "zombie-tx")
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    zombie.flush(10)
    successor = txn_producer(bootstrap, "zombie-tx")  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(10)
    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic, value=b"zombie-again")
        zombie.commit_transaction(10)
    error = raised.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), error
    assert read_values(bootstrap, topic, READ_COMMITTED) == [b"successor"]
    assert b"zombie" in read_values(bootstrap, topic, READ_UNCOMMITTED)


def test_transaction_past_its_timeout_is_aborted(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, "txn-timeout")
    producer = txn_producer(bootstrap, "slow-tx", **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    producer.produce(topic, value=b"too-slow")
    producer.flush(10)
    wait_until(
        lambda: _committed_end(bootstrap, topic)[0] == 2,
        15,
        interval_s=0.2,
        what="the broker aborting the transaction",
    )
    assert _committed_end(bootstrap, topic) == (2, 2)  # record + the broker's ABORT marker
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)
    assert read_values(bootstrap, topic, READ_COMMITTED, settle_s=1) == []


def test_send_offsets_commits_group_offsets_only_with_the_transaction(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    source = create_topic(bootstrap, "txn-source")
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        plain.produce(source, value=b"in-%d" % i)
    plain.flush(10)
    group = "txn-copier"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": READ_COMMITTED,
        }
    )
    consumer.subscribe([source])

    def a_record() -> Any:
        msg = consumer.poll(0.2)
        return msg if msg is not None and not msg.error() else None

    first = wait_until(a_record, 20, interval_s=0, what=f"a record of {source}")  # joined, assigned, reading
    assert first is not None and first.value() == b"in-0"
    producer = txn_producer(bootstrap, "copier-tx")

    def committed() -> int:
        return int(consumer.committed([TopicPartition(source, 0)], 10)[0].offset)

    for commit in (False, True):
        producer.begin_transaction()
        offsets = [TopicPartition(source, 0, 3 if not commit else 6)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
            assert committed() < 0  # the aborted transaction's offsets never reach the group
    assert committed() == 6
    consumer.close()


def test_kafka_python_transactional_producer(shared_broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, "txn-kafka-python")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-tx", max_block_ms=15_000)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"kept")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"dropped")
    producer.flush()
    producer.abort_transaction()
    producer.close(timeout=5)
    assert read_values(bootstrap, topic, READ_COMMITTED) == [b"kept"]


def test_find_coordinator_serves_transactional_ids_and_refuses_unknown_key_types(
    shared_broker: BrokerProcess,
) -> None:
    with WireClient(shared_broker.port) as wire:
        versions = wire.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        assert {24, 25, 26, 28, 65, 66} <= {k.api_key for k in versions.api_keys}
        answer = wire.request(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["billing-tx"]}
        ).coordinators[0]
        assert answer.error_code == ErrorCode.none and answer.port == shared_broker.port
        old = wire.request(ApiKey.FIND_COORDINATOR, 2, {"key": "billing-tx", "key_type": 1})
        assert old.error_code == ErrorCode.none and old.port == shared_broker.port
        unknown = wire.request(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 7, "coordinator_keys": ["x"]}
        ).coordinators[0]
        assert unknown.error_code == ErrorCode.invalid_request


def test_transaction_timeout_above_the_maximum_is_refused(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as wire:
        answer = wire.request(
            ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "greedy-tx", "transaction_timeout": 900_001}
        )
        assert answer.error_code == ErrorCode.invalid_transaction_timeout


def test_transaction_open_at_a_broker_crash_is_aborted_after_restart(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", free_port()) as broker:
        bootstrap = broker.bootstrap
        topic = create_topic(bootstrap, "txn-crash")
        done = txn_producer(bootstrap, "crash-tx")
        done.begin_transaction()
        done.produce(topic, value=b"committed-before")
        done.commit_transaction(10)
        done.begin_transaction()
        done.produce(topic, value=b"open-at-crash")
        done.flush(10)
        assert _committed_end(bootstrap, topic) == (2, 3)
        broker.stop(signal.SIGKILL)
        broker.start()
        assert _committed_end(bootstrap, topic) == (4, 4)  # the ABORT marker written at start
        assert read_values(bootstrap, topic, READ_COMMITTED) == [b"committed-before"]
        assert read_values(bootstrap, topic, READ_UNCOMMITTED) == [b"committed-before", b"open-at-crash"]
        with WireClient(broker.port) as wire:
            listed = wire.request(
                ApiKey.LIST_TRANSACTIONS,
                1,
                {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
            )
            states = {t.transactional_id: t.transaction_state for t in listed.transaction_states}
            assert states == {"crash-tx": "CompleteAbort"}
        successor = txn_producer(bootstrap, "crash-tx")
        successor.begin_transaction()
        successor.produce(topic, value=b"after-restart")
        successor.commit_transaction(10)
        assert read_values(bootstrap, topic, READ_COMMITTED) == [b"committed-before", b"after-restart"]


def test_aiokafka_transactional_producer(shared_broker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    bootstrap = shared_broker.bootstrap
    topic = create_topic(bootstrap, "txn-aiokafka")

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-tx")
        await asyncio.wait_for(producer.start(), 20)
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"kept")
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"dropped")
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert read_values(bootstrap, topic, READ_COMMITTED) == [b"kept"]
    assert sorted(read_values(bootstrap, topic, READ_UNCOMMITTED)) == [b"dropped", b"kept"]


def test_broker_refuses_to_start_on_a_transaction_state_it_cannot_read(tmp_path: Path) -> None:
    """Starting without the state would forget open transactions: their partitions would
    never get markers and read_committed readers would wait forever."""
    broker = BrokerProcess(tmp_path / "data", free_port())
    broker.start()
    broker.stop()
    (tmp_path / "data" / "transactions.json").write_text('{"version": 1, "transactions": [{"state": 3}]}')
    with pytest.raises(RuntimeError, match=r"transactions\.json is not a transaction state file"):
        broker.start()
