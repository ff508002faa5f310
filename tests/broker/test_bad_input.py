"""Bad input: random and mutated frames never crash the broker, other connections keep
working, and the errors Kafka defines are answered as Kafka does."""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logtrove.records import NewRecord, build_batch
from logtrove.testing import BrokerProcess, WireClient
from logtrove.wire import ApiKey

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _healthy(broker: BrokerProcess, bystander: WireClient | None = None) -> None:
    assert broker.alive(), broker.log.read_text()
    with WireClient(broker.port) as fresh:
        assert (
            fresh.request(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            ).error_code
            == 0
        )
    if bystander is not None:
        assert bystander.request(ApiKey.METADATA, 12, {"topics": None}).brokers[0].port == broker.port


def _send_raw(port: int, data: bytes) -> None:
    """Send bytes, read whatever comes back for a moment, close."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        try:
            sock.sendall(data)
            sock.settimeout(0.2)
            sock.recv(65536)
        except (TimeoutError, ConnectionError):
            pass


def _valid_frames(client: WireClient) -> list[bytes]:
    batch = bytes(build_batch([NewRecord(b"value", key=b"key", headers=(("h", b"v"),))]))
    return [
        client.encode_request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "fuzz", "client_software_version": "1"}
        ),
        client.encode_request(
            ApiKey.METADATA, 12, {"topics": [{"name": "fuzzed"}], "allow_auto_topic_creation": True}
        ),
        client.encode_request(
            ApiKey.PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [{"name": "fuzzed", "partition_data": [{"index": 0, "records": batch}]}],
            },
        ),
        client.encode_request(
            ApiKey.FETCH,
            11,
            {
                "replica_id": -1,
                "max_wait": 10,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "topic": "fuzzed",
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                    }
                ],
            },
        ),
        client.encode_request(
            ApiKey.LIST_OFFSETS,
            7,
            {"replica_id": -1, "topics": [{"name": "fuzzed", "partitions": [{"timestamp": -3}]}]},
        ),
    ]


@pytest.fixture(scope="module")
def frames(shared_broker: BrokerProcess) -> list[bytes]:
    with WireClient(shared_broker.port) as client:
        return _valid_frames(client)


@FUZZ
@given(payload=st.binary(min_size=0, max_size=300))
def test_random_frames_never_crash_the_broker(shared_broker: BrokerProcess, payload: bytes) -> None:
    _send_raw(shared_broker.port, struct.pack(">i", len(payload)) + payload)
    _send_raw(shared_broker.port, payload)
    assert shared_broker.alive()


@FUZZ
@given(data=st.data())
def test_mutated_frames_never_crash_the_broker(
    shared_broker: BrokerProcess, frames: list[bytes], data: st.DataObject
) -> None:
    frame = bytearray(data.draw(st.sampled_from(frames)))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        action = data.draw(st.sampled_from(["flip", "truncate", "insert", "zero"]))
        if action == "flip":
            frame[pos] ^= data.draw(st.integers(1, 255))
        elif action == "truncate":
            del frame[pos:]
            if not frame:
                frame.append(0)
        elif action == "insert":
            frame[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
        else:
            frame[pos] = 0xFF
    _send_raw(shared_broker.port, struct.pack(">i", len(frame)) + bytes(frame))
    assert shared_broker.alive()


def test_bystander_connection_survives_fuzzing(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as bystander:
        _healthy(shared_broker, bystander)
        for junk in (b"\x00\x00\x00\x08garbage!", b"\xff\xff\xff\xff", b"\x00\x00\x00\x0c\x00\x12\x00\x03"):
            _send_raw(shared_broker.port, junk)
        _healthy(shared_broker, bystander)


def test_unsupported_api_versions_version_gets_v0_error_35(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as client:
        # ApiVersions v99: header v1 (key, version, correlation id, client id), empty body
        client.send_frame(struct.pack(">hhih", 18, 99, 42, 1) + b"x")
        frame = client.recv_frame()
    correlation, error, count = struct.unpack_from(">ihi", frame)
    assert (correlation, error) == (42, 35)
    keys = {struct.unpack_from(">h", frame, 10 + 6 * i)[0] for i in range(count)}
    assert {0, 1, 2, 3, 18} <= keys


def test_oversized_frame_closes_only_that_connection(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as bystander:
        with socket.create_connection(("127.0.0.1", shared_broker.port), timeout=5) as sock:
            sock.sendall(struct.pack(">i", 1 << 30))
            assert sock.recv(10) == b""  # closed by the broker
        _healthy(shared_broker, bystander)


def test_produce_errors_are_kafka_error_codes(shared_broker: BrokerProcess) -> None:
    good = bytes(build_batch([NewRecord(b"v" * 100)]))
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # CRC mismatch

    def produce(topic: str, partition: int, records: bytes) -> int:
        with WireClient(shared_broker.port) as client:
            client.request(
                ApiKey.METADATA, 12, {"topics": [{"name": "errs"}], "allow_auto_topic_creation": True}
            )
            resp = client.request(
                ApiKey.PRODUCE,
                9,
                {
                    "acks": -1,
                    "timeout": 1000,
                    "topic_data": [
                        {"name": topic, "partition_data": [{"index": partition, "records": records}]}
                    ],
                },
            )
        return int(resp.responses[0].partition_responses[0].error_code)

    assert produce("errs", 0, good) == 0
    assert produce("errs", 0, bytes(corrupt)) == 2  # CORRUPT_MESSAGE
    assert produce("errs", 5, good) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert produce("no-such-topic", 0, good) == 3
    big = bytes(build_batch([NewRecord(bytes(2_000_000))]))
    assert produce("errs", 0, big) == 10  # MESSAGE_TOO_LARGE
    _healthy(shared_broker)


def test_fetch_out_of_range_offset(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as client:
        client.request(ApiKey.METADATA, 12, {"topics": [{"name": "oor"}], "allow_auto_topic_creation": True})
        resp = client.request(
            ApiKey.FETCH,
            11,
            {
                "replica_id": -1,
                "max_wait": 10,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "topic": "oor",
                        "partitions": [{"partition": 0, "fetch_offset": 99, "partition_max_bytes": 1000}],
                    }
                ],
            },
        )
    part = resp.responses[0].partitions[0]
    assert (int(part.error_code), part.high_watermark) == (1, 0)  # OFFSET_OUT_OF_RANGE
