"""A mirrored (followed) topic is read-only to every client API that would change it, and
a transaction that names one never gets stuck: AddPartitionsToTxn refuses it, the
transaction is aborted, the transactional ID works again, and no marker is appended
over and over. CreatePartitions and the configs the mirror copies are refused too
(POLICY_VIOLATION); configs that only shape local files are not."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)
from kio.schema.errors import ErrorCode
from tests.broker.txn_clients import READ_COMMITTED, read_values, txn_producer

from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.testing import BrokerProcess, WireClient, free_port
from logtrove.wire import ApiKey

PLAIN, MIRRORED = "local", "mirrored"  # "local" sorts first: its marker is written before


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        storage.create_topic(PLAIN, 1)
        storage.create_topic(MIRRORED, 1, {"retention.ms": "86400000"}, followed_from="source.example:9092")
        storage.log(MIRRORED, 0).append_replicated(build_batch([NewRecord(b"copied")]))
    with BrokerProcess(data, free_port()) as proc:
        yield proc


def end_offset(wire: WireClient, topic: str) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    answer = wire.request(ApiKey.LIST_OFFSETS, 7, body)
    return int(answer.topics[0].partitions[0].offset)


def test_a_transaction_naming_a_mirrored_partition_ends_and_frees_its_id(broker: BrokerProcess) -> None:
    producer = txn_producer(broker.bootstrap, "stuck")
    producer.begin_transaction()
    producer.produce(PLAIN, b"in the transaction")
    producer.produce(MIRRORED, b"not allowed here")
    with pytest.raises(KafkaException):
        producer.commit_transaction(15)
    _abort_or_drop(producer)
    with WireClient(broker.port) as wire:
        plain_end = end_offset(wire, PLAIN)
        time.sleep(3)  # the coordinator's retry round runs every second
        assert end_offset(wire, PLAIN) == plain_end, "markers keep being appended"
        assert end_offset(wire, MIRRORED) == 1
    again = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "stuck"})
    again.init_transactions(15)  # CONCURRENT_TRANSACTIONS for good if the transaction hung
    again.begin_transaction()
    again.produce(PLAIN, b"committed")
    again.commit_transaction(15)
    assert read_values(broker.bootstrap, PLAIN, READ_COMMITTED) == [b"committed"]


def _abort_or_drop(producer: Producer) -> None:
    """Abort if the client still can (the error is abortable); a fatal one leaves the
    transaction to the next producer of the ID, which fences and aborts it."""
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(15)


def test_add_partitions_to_txn_refuses_a_mirrored_partition(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        init = wire.request(
            ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "raw", "transaction_timeout": 60_000}
        )
        body = {
            "v3_and_below_transactional_id": "raw",
            "v3_and_below_producer_id": init.producer_id,
            "v3_and_below_producer_epoch": init.producer_epoch,
            "v3_and_below_topics": [
                {"name": PLAIN, "partitions": [0]},
                {"name": MIRRORED, "partitions": [0]},
            ],
        }
        answer = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, body)
        codes = {
            t.name: t.results_by_partition[0].partition_error_code
            for t in answer.results_by_topic_v3_and_below
        }
        assert codes == {
            PLAIN: ErrorCode.operation_not_attempted,
            MIRRORED: ErrorCode.invalid_topic_exception,
        }
        end = {
            "transactional_id": "raw",
            "producer_id": init.producer_id,
            "producer_epoch": init.producer_epoch,
            "committed": True,
        }
        assert wire.request(ApiKey.END_TXN, 3, end).error_code == ErrorCode.invalid_txn_state
        again = wire.request(
            ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "raw", "transaction_timeout": 60_000}
        )
        assert again.error_code == ErrorCode.none


def test_admin_changes_to_a_mirrored_topic_are_refused(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as grown:
        admin.create_partitions([NewPartitions(MIRRORED, 3)])[MIRRORED].result(15)
    assert grown.value.args[0].code() == ErrorCode.policy_violation.value
    resource = ConfigResource("TOPIC", MIRRORED)
    retention = ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
    resource.add_incremental_config(retention)
    with pytest.raises(KafkaException) as altered:
        admin.incremental_alter_configs([resource])[resource].result(15)
    assert altered.value.args[0].code() == ErrorCode.policy_violation.value
    local = ConfigResource("TOPIC", MIRRORED)
    local.add_incremental_config(
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)
    )
    admin.incremental_alter_configs([local])[local].result(15)
    described = admin.describe_configs([ConfigResource("TOPIC", MIRRORED)])
    configs = next(iter(described.values())).result(15)
    assert configs["retention.ms"].value == "86400000" and configs["segment.bytes"].value == "1048576"
    metadata = admin.list_topics(MIRRORED, timeout=15)
    assert len(metadata.topics[MIRRORED].partitions) == 1
