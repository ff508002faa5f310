"""ACLs on the transaction APIs, as Kafka enforces them: WRITE on the transactional id for
every transactional request, WRITE on each topic added, READ on the group whose offsets a
transaction commits; DescribeTransactions and ListTransactions show only what the
principal may DESCRIBE. A PLAINTEXT connection is ``User:ANONYMOUS``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from kio.schema.errors import ErrorCode

from logtrove.storage import Storage
from logtrove.testing import BrokerProcess, WireClient, cli_in, free_port
from logtrove.wire import ApiKey

ANON = "User:ANONYMOUS"


def _acls(tmp_path: Path, data: Path, *args: str) -> None:
    done = cli_in(tmp_path, "acls", "add", "--data", str(data), "-p", ANON, *args)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """ANONYMOUS may write and describe transactional id ``granted-tx``, write topic
    ``open``, read group ``readers``; nothing else."""
    tmp_path = tmp_path_factory.mktemp("txn-acls")
    data = tmp_path / "data"
    with Storage.open(data) as storage:
        for name in ("open", "secret"):
            storage.create_topic(name, 1)
    _acls(tmp_path, data, "-o", "WRITE", "-o", "DESCRIBE", "--transactional-id", "granted-tx")
    _acls(tmp_path, data, "-o", "WRITE", "-o", "DESCRIBE", "--topic", "open")
    _acls(tmp_path, data, "-o", "READ", "--group", "readers")
    with BrokerProcess(data, free_port(), "--authorizer") as proc:
        yield proc


def test_a_transaction_on_granted_resources_commits_and_others_are_refused(secured: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": secured.bootstrap, "transactional.id": "granted-tx"})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce("open", b"ok")
    producer.commit_transaction(15)
    producer.begin_transaction()
    producer.produce("secret", b"no")
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(15)
    assert raised.value.args[0].txn_requires_abort()  # AddPartitionsToTxn: TOPIC_AUTHORIZATION_FAILED
    producer.abort_transaction(15)
    denied = Producer({"bootstrap.servers": secured.bootstrap, "transactional.id": "other-tx"})
    with pytest.raises(KafkaException) as refused:
        denied.init_transactions(15)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_transaction_requests_need_write_on_the_transactional_id(secured: BrokerProcess) -> None:
    with WireClient(secured.port) as wire:
        ids = {"transactional_id": "other-tx", "producer_id": 1, "producer_epoch": 0}
        assert wire.request(ApiKey.END_TXN, 3, {**ids, "committed": True}).error_code == (
            ErrorCode.transactional_id_authorization_failed
        )
        assert wire.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {**ids, "group_id": "readers"}).error_code == (
            ErrorCode.transactional_id_authorization_failed
        )
        granted = {"transactional_id": "granted-tx", "producer_id": 1, "producer_epoch": 0}
        assert wire.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {**granted, "group_id": "writers"}).error_code == (
            ErrorCode.group_authorization_failed
        )
        commit = {
            **granted,
            "group_id": "readers",
            "topics": [{"name": "secret", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
        }
        answer = wire.request(ApiKey.TXN_OFFSET_COMMIT, 3, commit)
        assert answer.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        described = wire.request(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["other-tx"]}
        ).transaction_states[0]
        assert described.error_code == ErrorCode.transactional_id_authorization_failed
        listed = wire.request(
            ApiKey.LIST_TRANSACTIONS,
            1,
            {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
        )
        assert {t.transactional_id for t in listed.transaction_states} <= {"granted-tx"}
