"""Per-record errors in Produce v8+ (KIP-467; issue 14, finding 5, librdkafka test 0011).

A batch with keyless records sent to a compacted topic is refused whole; the response
names every keyless record (``record_errors``: its index in the batch and why), so a
client fails those with INVALID_RECORD and the others of the batch as failed because of
another record. The broker used to answer INVALID_RECORD with no record named, and
librdkafka then failed every record of the batch with INVALID_RECORD."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from tests.broker.raw_produce import log_end

from logtrove.records import Compression, NewRecord, build_batch
from logtrove.records.walk import MAX_KEYLESS_REPORTED
from logtrove.testing import BrokerProcess, WireClient
from logtrove.wire import ApiKey


def _compacted(broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(10)


def test_a_raw_produce_names_every_keyless_record_of_the_batch(shared_broker: BrokerProcess) -> None:
    topic = "record-errors-raw"
    _compacted(shared_broker, topic)
    keyless = {1, 4, 5}
    batch = build_batch([NewRecord(b"v%d" % i, key=None if i in keyless else b"k") for i in range(7)])
    with WireClient(shared_broker.port) as client:
        for version in (8, 9):  # the last classic and the first flexible encoding
            resp = client.request(
                ApiKey.PRODUCE,
                version,
                {
                    "acks": -1,
                    "timeout": 5000,
                    "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
                },
            )
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.invalid_record
            assert part.error_message is not None and "3 of the batch's 7" in part.error_message
            named = {int(e.batch_index): e.batch_index_error_message for e in part.record_errors}
            assert set(named) == keyless
            assert all(m and "without key" in m and f"{topic}-0" in m for m in named.values())
        assert log_end(client, topic) == 0  # nothing of the batch was written


def test_a_raw_v9_produce_names_the_first_keyless_records_up_to_the_cap(shared_broker: BrokerProcess) -> None:
    """A hostile batch of thousands of keyless records costs a bounded answer: the first
    MAX_KEYLESS_REPORTED are named, the message gives the whole count."""
    topic = "record-errors-cap"
    _compacted(shared_broker, topic)
    n = 3 * MAX_KEYLESS_REPORTED
    keyless = [i for i in range(n) if i % 3 != 1]  # two of every three
    recs = [NewRecord(b"", key=None if i % 3 != 1 else b"k") for i in range(n)]
    batch = build_batch(recs, compression=Compression.ZSTD)
    with WireClient(shared_broker.port) as client:
        resp = client.request(
            ApiKey.PRODUCE,
            9,
            {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.invalid_record
        assert [int(e.batch_index) for e in part.record_errors] == keyless[:MAX_KEYLESS_REPORTED]
        assert part.error_message is not None
        assert f"{len(keyless)} of the batch's {n} have none" in part.error_message
        assert f"the first {MAX_KEYLESS_REPORTED} named" in part.error_message
        assert log_end(client, topic) == 0


def test_librdkafka_fails_keyless_records_and_blames_the_others_on_them(shared_broker: BrokerProcess) -> None:
    topic = "record-errors-librdkafka"
    _compacted(shared_broker, topic)
    reports: dict[int, Any] = {}

    def delivered(err: Any, msg: Any) -> None:
        reports[int(msg.value())] = err

    producer = Producer(
        {"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 500, "batch.num.messages": 1000}
    )
    for i in range(100):  # one batch: every tenth record has no key
        producer.produce(
            topic, key=None if i % 10 == 0 else b"k%d" % i, value=b"%d" % i, on_delivery=delivered
        )
    assert producer.flush(30) == 0
    keyless = {i for i in range(100) if i % 10 == 0}
    assert {
        i for i, e in reports.items() if e is not None and e.code() == KafkaError.INVALID_RECORD
    } == keyless
    blamed = {
        i for i, e in reports.items() if e is not None and e.code() == KafkaError._INVALID_DIFFERENT_RECORD
    }
    assert blamed == set(range(100)) - keyless

    # the broker serves on: a batch of keyed records is accepted
    ok: list[Any] = []
    producer.produce(topic, key=b"k", value=b"after", on_delivery=lambda err, msg: ok.append(err))
    assert producer.flush(10) == 0
    assert ok == [None]
