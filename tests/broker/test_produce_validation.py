"""Produce validation against a real broker (issue 13, finding 3 and the bomb of 4).

Each malformed batch kind has a valid CRC (only the record walk can catch it), is sent
raw over the Kafka protocol, and must be refused with Kafka's error code; the log end
offset does not move, and a confluent-kafka consumer then reads the good record produced
after it (it used to stall on the stored garbage)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.errors import ErrorCode
from tests.broker.raw_produce import log_end, produce_raw
from tests.records.helpers import patch_header, with_payload, zstd_zeros

from logtrove.records import Compression, NewRecord, build_batch
from logtrove.records.record import encode_record
from logtrove.testing import BrokerProcess, WireClient, consume_until
from logtrove.wire import ApiKey


def good(value: bytes, n: int = 2, codec: Compression = Compression.NONE) -> bytes:
    return build_batch([NewRecord(value + b"-%d" % i, key=b"k") for i in range(n)], compression=codec)


def malformed_kinds() -> dict[str, tuple[bytes, ErrorCode]]:
    plain = good(b"bad")
    shifted = encode_record(0, 0, NewRecord(b"a")) + encode_record(5, 0, NewRecord(b"b"))
    return {
        "garbage-records": (bytes(with_payload(plain, b"\x07\x00\x99" * 20)), ErrorCode.invalid_record),
        "codec-5": (bytes(patch_header(plain, attributes=5)), ErrorCode.unsupported_compression_type),
        "codec-7": (bytes(patch_header(plain, attributes=7)), ErrorCode.unsupported_compression_type),
        "gzip-not-gzip": (bytes(patch_header(plain, attributes=1)), ErrorCode.invalid_record),
        "count-lies": (
            bytes(patch_header(plain, record_count=5, last_offset_delta=4)),
            ErrorCode.invalid_record,
        ),
        "last-offset-delta-lies": (
            bytes(patch_header(plain, record_count=2**31 - 1, last_offset_delta=2**31 - 2)),
            ErrorCode.invalid_record,
        ),
        "offset-deltas-not-in-order": (bytes(with_payload(plain, shifted)), ErrorCode.invalid_record),
        "zstd-bomb-1GiB": (
            bytes(with_payload(patch_header(plain, attributes=4), zstd_zeros(1 << 30))),
            ErrorCode.invalid_record,
        ),
    }


def consume_all(broker: BrokerProcess, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        got = consume_until(consumer, count, 20, poll_s=0.2, skip_errors=True, what=f"records of {topic}")
    finally:
        consumer.close()
    return [message.value() for message in got]


@pytest.mark.parametrize("kind", list(malformed_kinds()))
def test_malformed_batch_is_refused_and_a_consumer_reaches_the_next_good_record(
    shared_broker: BrokerProcess, kind: str
) -> None:
    batch, code = malformed_kinds()[kind]
    topic = f"bad-{kind}"
    with WireClient(shared_broker.port) as client:
        client.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        assert produce_raw(client, topic, good(b"before"))[0] == 0
        end = log_end(client, topic)

        error, message, _ = produce_raw(client, topic, batch)

        assert (ErrorCode(error), log_end(client, topic)) == (code, end), message
        assert message  # says what is wrong
        assert produce_raw(client, topic, good(b"after")) == (0, None, end)
    values = consume_all(shared_broker, topic, 4)
    assert values == [b"before-0", b"before-1", b"after-0", b"after-1"]


def test_a_bomb_is_refused_with_a_message_naming_the_limit(shared_broker: BrokerProcess) -> None:
    batch, _ = malformed_kinds()["zstd-bomb-1GiB"]
    assert len(batch) < 64 << 10
    with WireClient(shared_broker.port) as client:
        client.request(ApiKey.METADATA, 12, {"topics": [{"name": "bomb"}], "allow_auto_topic_creation": True})
        error, message, _ = produce_raw(client, "bomb", batch)
    assert ErrorCode(error) is ErrorCode.invalid_record
    assert message is not None and "decompresses to more than" in message


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_valid_batches_of_every_codec_are_still_accepted(
    shared_broker: BrokerProcess, codec: Compression
) -> None:
    topic = f"ok-{codec.name.lower()}"
    with WireClient(shared_broker.port) as client:
        client.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        assert produce_raw(client, topic, good(b"v", n=100, codec=codec))[0] == 0
    assert len(consume_all(shared_broker, topic, 100)) == 100
