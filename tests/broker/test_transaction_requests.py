"""The transaction APIs as raw requests: the answers Kafka gives for the cases clients
rarely produce — old versions' error codes, unknown partitions, the batched
AddPartitionsToTxn v4 with ``verify_only``, batches that break the transaction rules,
OffsetFetch ``require_stable`` while a transaction holds an offset, and a read_committed
Fetch's last stable offset and aborted-transaction list."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from tests.broker.raw_produce import produce_raw

from logtrove.records import NewRecord, build_batch
from logtrove.testing import BrokerProcess, WireClient
from logtrove.txn import marker_batch
from logtrove.wire import ApiKey


def _topic(wire: WireClient, name: str) -> str:
    body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}], "timeout": 10_000}
    assert wire.request(ApiKey.CREATE_TOPICS, 5, body).topics[0].error_code == ErrorCode.none
    return name


def _init(wire: WireClient, tid: str, version: int = 4) -> tuple[int, int]:
    answer = wire.request(
        ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": tid, "transaction_timeout": 60_000}
    )
    assert answer.error_code == ErrorCode.none
    return int(answer.producer_id), int(answer.producer_epoch)


def _add(
    wire: WireClient, tid: str, pid: int, epoch: int, topics: dict[str, list[int]], version: int = 3
) -> Any:
    body = {
        "v3_and_below_transactional_id": tid,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    answer = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, body)
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def _end(wire: WireClient, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> ErrorCode:
    body = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
    return ErrorCode(wire.request(ApiKey.END_TXN, version, body).error_code)


def _txn_batch(pid: int, epoch: int, seq: int, value: bytes) -> bytes:
    return build_batch(
        [NewRecord(value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )


def _fetch_committed(wire: WireClient, topic: str, offset: int = 0) -> Any:
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    return wire.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]


def test_unknown_partitions_fail_the_request_and_the_rest_is_not_attempted(
    shared_broker: BrokerProcess,
) -> None:
    with WireClient(shared_broker.port) as wire:
        topic = _topic(wire, "tr-unknown")
        pid, epoch = _init(wire, "tr-unknown-tx")
        codes = _add(wire, "tr-unknown-tx", pid, epoch, {topic: [0, 5], "tr-missing": [0]})
        assert codes == {
            (topic, 0): ErrorCode.operation_not_attempted,
            (topic, 5): ErrorCode.unknown_topic_or_partition,
            ("tr-missing", 0): ErrorCode.unknown_topic_or_partition,
        }
        assert _end(wire, "tr-unknown-tx", pid, epoch, True) == ErrorCode.invalid_txn_state  # nothing begun


def test_old_versions_get_invalid_producer_epoch_for_a_fenced_producer(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as wire:
        topic = _topic(wire, "tr-fenced")
        pid, old = _init(wire, "tr-fenced-tx")
        _init(wire, "tr-fenced-tx")
        assert _add(wire, "tr-fenced-tx", pid, old, {topic: [0]}, version=1) == {
            (topic, 0): ErrorCode.invalid_producer_epoch
        }
        assert _add(wire, "tr-fenced-tx", pid, old, {topic: [0]}, version=3) == {
            (topic, 0): ErrorCode.producer_fenced
        }
        assert _end(wire, "tr-fenced-tx", pid, old, True, version=1) == ErrorCode.invalid_producer_epoch
        assert _end(wire, "tr-fenced-tx", pid, old, True, version=3) == ErrorCode.producer_fenced
        stale = {"transactional_id": "tr-fenced-tx", "transaction_timeout": 60_000, "producer_id": pid}
        assert (
            wire.request(ApiKey.INIT_PRODUCER_ID, 3, {**stale, "producer_epoch": old}).error_code
            == ErrorCode.invalid_producer_epoch
        )
        assert (
            wire.request(ApiKey.INIT_PRODUCER_ID, 4, {**stale, "producer_epoch": old}).error_code
            == ErrorCode.producer_fenced
        )
        assert wire.request(
            ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "", "transaction_timeout": 60_000}
        ).error_code == (ErrorCode.invalid_request)


def test_batched_add_partitions_answers_each_transaction(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as wire:
        topic = _topic(wire, "tr-batched")
        pid, epoch = _init(wire, "tr-batched-tx")

        def add(verify_only: bool, epoch: int = epoch) -> dict[str, ErrorCode]:
            txn = {
                "transactional_id": "tr-batched-tx",
                "producer_id": pid,
                "producer_epoch": epoch,
                "verify_only": verify_only,
                "topics": [{"name": topic, "partitions": [0]}],
            }
            answer = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [txn]})
            assert answer.error_code == ErrorCode.none
            return {
                r.transactional_id: r.topic_results[0].results_by_partition[0].partition_error_code
                for r in answer.results_by_transaction
            }

        assert add(verify_only=True) == {"tr-batched-tx": ErrorCode.invalid_txn_state}  # not added yet
        assert add(verify_only=False) == {"tr-batched-tx": ErrorCode.none}
        assert add(verify_only=True) == {"tr-batched-tx": ErrorCode.none}
        assert add(verify_only=False, epoch=epoch + 1) == {"tr-batched-tx": ErrorCode.producer_fenced}


def test_produce_refuses_batches_outside_the_transaction_rules(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as wire:
        topic = _topic(wire, "tr-produce")
        pid, epoch = _init(wire, "tr-produce-tx")
        assert produce_raw(wire, topic, _txn_batch(pid, epoch, 0, b"early"))[0] == ErrorCode.invalid_txn_state
        _add(wire, "tr-produce-tx", pid, epoch, {topic: [0]})
        assert produce_raw(wire, topic, _txn_batch(pid, epoch, 0, b"ok"))[0] == ErrorCode.none
        assert produce_raw(wire, topic, _txn_batch(pid, epoch - 1 if epoch else 5, 0, b"x"))[0] == (
            ErrorCode.invalid_producer_epoch
        )
        described = wire.request(
            ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]}
        )
        (producer,) = described.topics[0].partitions[0].active_producers
        assert (producer.producer_id, producer.current_txn_start_offset) == (pid, 0)
        forged = marker_batch(pid, epoch, True, coordinator_epoch=0, now_ms=1)
        code, message, _ = produce_raw(wire, topic, forged)
        assert code == ErrorCode.invalid_record and message is not None and "control" in message
        fetched = _fetch_committed(wire, topic)
        assert (fetched.high_watermark, fetched.last_stable_offset) == (1, 0)
        assert not fetched.records  # the open transaction's batch is above the LSO


def test_read_committed_fetch_lists_the_aborted_transactions(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as wire:
        topic = _topic(wire, "tr-aborted")
        pid, epoch = _init(wire, "tr-aborted-tx")
        _add(wire, "tr-aborted-tx", pid, epoch, {topic: [0]})
        produce_raw(wire, topic, _txn_batch(pid, epoch, 0, b"a"))
        produce_raw(wire, topic, _txn_batch(pid, epoch, 1, b"b"))
        assert _end(wire, "tr-aborted-tx", pid, epoch, False) == ErrorCode.none
        fetched = _fetch_committed(wire, topic)
        assert (fetched.high_watermark, fetched.last_stable_offset) == (3, 3)
        assert [(a.producer_id, a.first_offset) for a in fetched.aborted_transactions] == [(pid, 0)]
        assert fetched.records is not None and len(fetched.records) > 0
        assert _fetch_committed(wire, topic, offset=3).aborted_transactions == ()


def test_offset_fetch_require_stable_waits_for_the_transaction(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as wire:
        topic = _topic(wire, "tr-stable")
        pid, epoch = _init(wire, "tr-stable-tx")
        ids = {"transactional_id": "tr-stable-tx", "producer_id": pid, "producer_epoch": epoch}
        assert (
            wire.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {**ids, "group_id": "tr-g"}).error_code
            == ErrorCode.none
        )
        commit = {
            **ids,
            "group_id": "tr-g",
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 7}]}],
        }
        answer = wire.request(ApiKey.TXN_OFFSET_COMMIT, 3, commit)
        assert answer.topics[0].partitions[0].error_code == ErrorCode.none

        def fetch(stable: bool) -> Any:
            body = {
                "group_id": "tr-g",
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "require_stable": stable,
            }
            return wire.request(ApiKey.OFFSET_FETCH, 7, body).topics[0].partitions[0]

        assert fetch(True).error_code == ErrorCode.unstable_offset_commit
        assert fetch(False).committed_offset == -1  # not the group's until the commit
        assert _end(wire, "tr-stable-tx", pid, epoch, True) == ErrorCode.none
        after = fetch(True)
        assert (after.error_code, after.committed_offset) == (ErrorCode.none, 7)


def test_aborted_transactions_listed_only_for_the_batches_returned(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as wire:
        topic = _topic(wire, "tr-bounded")
        pids = []
        for round_ in range(3):  # three aborted transactions, one after the other
            pid, epoch = _init(wire, f"tr-bounded-{round_}")
            _add(wire, f"tr-bounded-{round_}", pid, epoch, {topic: [0]})
            produce_raw(wire, topic, _txn_batch(pid, epoch, 0, b"x" * 2000))
            assert _end(wire, f"tr-bounded-{round_}", pid, epoch, False) == ErrorCode.none
            pids.append(pid)
        body = {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 100,  # one batch: the first transaction's record
            "isolation_level": 1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 100}],
                }
            ],
        }
        first = wire.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]
        assert [(a.producer_id, a.first_offset) for a in first.aborted_transactions] == [(pids[0], 0)]
        assert [a.producer_id for a in _fetch_committed(wire, topic).aborted_transactions] == pids


def test_describe_transactions_of_an_unknown_id_is_not_found(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as wire:
        state = wire.request(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tr-never-seen"]}
        ).transaction_states[0]
        assert state.error_code == ErrorCode.transactional_id_not_found
