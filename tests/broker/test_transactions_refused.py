"""Transactions are not served yet, and the broker says so at once.

A transactional producer's ``init_transactions()`` fails within a few seconds with a
fatal, non-retriable TRANSACTIONAL_ID_AUTHORIZATION_FAILED that explains itself, in
confluent-kafka (librdkafka), kafka-python and aiokafka — instead of retrying
COORDINATOR_NOT_AVAILABLE until the client's own timeout. ApiVersions advertises none of
the transactional APIs, and idempotent (non-transactional) producers keep working.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from kio.schema.errors import ErrorCode
from tests.broker import clients
from tests.broker.conftest import BrokerProcess
from tests.broker.wire import WireClient

FAIL_WITHIN_S = 3.0  # the clients' own timeouts here are 10 s and more
TRANSACTIONAL_APIS = {24, 25, 26, 28}  # AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit


def test_confluent_init_transactions_fails_fast_and_fatally(shared_broker: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": "billing-tx"})
    started = time.monotonic()
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(10)
    elapsed = time.monotonic() - started
    error = raised.value.args[0]
    assert elapsed < FAIL_WITHIN_S, f"init_transactions took {elapsed:.1f} s to fail"
    assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error
    assert error.fatal() and not error.retriable() and not error.txn_requires_abort()
    assert "transactions are not supported" in error.str()


def test_python_clients_init_transactions_fail_fast(shared_broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TransactionalIdAuthorizationFailed
    from kafka import KafkaProducer
    from kafka.errors import TransactionalIdAuthorizationFailedError

    producer = KafkaProducer(
        bootstrap_servers=shared_broker.bootstrap, transactional_id="ledger-tx", max_block_ms=10_000
    )
    started = time.monotonic()
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        producer.init_transactions()
    assert time.monotonic() - started < FAIL_WITHIN_S
    producer.close(timeout=5)

    async def aiokafka_start() -> float:
        aio = AIOKafkaProducer(bootstrap_servers=shared_broker.bootstrap, transactional_id="audit-tx")
        began = time.monotonic()
        try:
            with pytest.raises(TransactionalIdAuthorizationFailed):
                await asyncio.wait_for(aio.start(), 20)
            return time.monotonic() - began
        finally:
            await aio.stop()

    assert asyncio.run(aiokafka_start()) < FAIL_WITHIN_S


def test_find_coordinator_refuses_transactional_ids_and_unknown_key_types(
    shared_broker: BrokerProcess,
) -> None:
    with WireClient(shared_broker.port) as wire:
        versions = wire.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert not TRANSACTIONAL_APIS & {k.api_key for k in versions.api_keys}
        answer = wire.request(10, 4, {"key_type": 1, "coordinator_keys": ["billing-tx"]}).coordinators[0]
        assert answer.error_code == ErrorCode.transactional_id_authorization_failed
        assert "not supported" in answer.error_message and answer.node_id == -1
        old = wire.request(10, 2, {"key": "billing-tx", "key_type": 1})
        assert old.error_code == ErrorCode.transactional_id_authorization_failed
        assert wire.request(10, 4, {"key_type": 7, "coordinator_keys": ["x"]}).coordinators[0].error_code == (
            ErrorCode.invalid_request
        )
        group = wire.request(10, 4, {"key_type": 0, "coordinator_keys": ["g"]}).coordinators[0]
        assert group.error_code == ErrorCode.none and group.port == shared_broker.port


def test_idempotent_producer_still_works(shared_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_topics([NewTopic("idempotent", 1, 1)])["idempotent"].result(10)
    messages: list[clients.Message] = [(b"k%d" % i, b"v%d" % i, []) for i in range(20)]
    clients.produce_confluent(shared_broker.bootstrap, "idempotent", messages, **{"enable.idempotence": True})
    assert clients.consume_confluent(shared_broker.bootstrap, "idempotent", 20) == messages
