"""Zig-zag varints: the encoding Kafka records use for lengths, deltas and counts."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logtrove.records import CorruptRecordError
from logtrove.records.varint import decode_varint, encode_varint

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's schema loader
    from kafka.record.util import encode_varint as kafka_python_encode_varint

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (300, b"\xd8\x04"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_known_values_encode_as_kafka_specifies(value, encoded):
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))


@settings(max_examples=500)
@given(value=INT64)
def test_every_int64_round_trips(value):
    encoded = encode_varint(value)

    assert 1 <= len(encoded) <= 10
    assert decode_varint(encoded, 0) == (value, len(encoded))


@settings(max_examples=300)
@given(value=INT64)
def test_encoding_matches_kafka_python(value):
    theirs = bytearray()
    kafka_python_encode_varint(value, theirs.append)

    assert encode_varint(value) == bytes(theirs)


@given(values=st.lists(INT64, max_size=20), prefix=st.binary(max_size=5))
def test_consecutive_varints_decode_from_any_position(values, prefix):
    buf = prefix + b"".join(encode_varint(v) for v in values)
    pos = len(prefix)
    decoded = []
    for _ in values:
        value, pos = decode_varint(buf, pos)
        decoded.append(value)

    assert decoded == values
    assert pos == len(buf)


@pytest.mark.parametrize("truncated", [b"", b"\x80", b"\xff\xff\xff"])
def test_buffer_ending_inside_a_varint_is_a_corrupt_record(truncated):
    with pytest.raises(CorruptRecordError, match="ends inside a varint"):
        decode_varint(truncated, 0)


def test_varint_longer_than_ten_bytes_is_a_corrupt_record():
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes"):
        decode_varint(b"\x80" * 10 + b"\x01", 0)
