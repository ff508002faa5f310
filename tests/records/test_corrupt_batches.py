"""Bad bytes are rejected with the specific error of ``logtrove.records.errors``."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logtrove.records import (
    HEADER_SIZE,
    Compression,
    CorruptRecordError,
    CrcMismatchError,
    InvalidLengthError,
    InvalidMagicError,
    InvalidRecordCountError,
    NewRecord,
    OffsetOverflowError,
    RecordsError,
    UnsupportedCompressionError,
    assign_offsets,
    build_batch,
    count_records,
    iter_records,
    read_header,
    validate_batch,
    validate_produced_batch,
)
from logtrove.records.record import encode_record

from .helpers import (
    COMPRESSED_CODECS,
    codecs,
    many_records,
    patch_header,
    recompute_crc,
    record_lists,
    sample_records,
    with_payload,
)

MAGIC_AT = 16
ATTRIBUTES_AT = 21


SAMPLE_BATCH = build_batch(
    sample_records(), base_offset=100, producer_id=5, producer_epoch=0, base_sequence=0
)


@pytest.fixture
def batch() -> bytes:
    return SAMPLE_BATCH


# ── magic ──────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_wrong_magic_is_rejected(batch, magic):
    bad = bytearray(batch)
    bad[MAGIC_AT] = magic & 0xFF

    with pytest.raises(InvalidMagicError):
        validate_batch(bad)
    with pytest.raises(InvalidMagicError):
        read_header(bad)
    with pytest.raises(InvalidMagicError):
        list(iter_records(bad))


# ── CRC ────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("where", [ATTRIBUTES_AT, HEADER_SIZE - 1, HEADER_SIZE + 3, -1])
def test_crc_mismatch_is_rejected(batch, where):
    bad = bytearray(batch)
    bad[where] ^= 0x01

    with pytest.raises(CrcMismatchError):
        validate_batch(bad)


def test_corrupted_stored_crc_is_rejected(batch):
    bad = bytearray(batch)
    bad[18] ^= 0x80

    with pytest.raises(CrcMismatchError):
        validate_produced_batch(bad)


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name.lower())
def test_flipped_byte_in_a_compressed_payload_fails_the_crc(codec):
    good = build_batch(many_records(200), compression=codec)
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF

    with pytest.raises(CrcMismatchError):
        validate_batch(bad)


# ── length ─────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("keep", [0, 11, 12, HEADER_SIZE - 1, HEADER_SIZE, -1])
def test_truncated_batch_is_rejected(batch, keep):
    truncated = batch[:keep]

    with pytest.raises(InvalidLengthError):
        validate_batch(truncated)


@pytest.mark.parametrize("extra", [b"\x00", b"\x00" * 12, b"x" * 100])
def test_trailing_bytes_are_rejected(batch, extra):
    with pytest.raises(InvalidLengthError, match="trailing"):
        validate_batch(batch + extra)
    with pytest.raises(InvalidLengthError):
        validate_produced_batch(batch + extra)


def test_trailing_bytes_are_allowed_when_not_expecting_a_full_buffer(batch):
    header = validate_batch(batch + b"next batch...", expect_full=False)

    assert header.size == len(batch)


@pytest.mark.parametrize("length", [-1, 0, HEADER_SIZE - 12 - 1])
def test_batch_length_shorter_than_the_header_is_rejected(batch, length):
    bad = patch_header(batch, batch_length=length)

    with pytest.raises(InvalidLengthError):
        validate_batch(bad, expect_full=False)


# ── record count ───────────────────────────────────────────────────────────────


def test_produced_batch_with_fewer_records_than_offsets_is_rejected(batch):
    header = read_header(batch)
    bad = patch_header(batch, record_count=header.record_count - 1)

    validate_batch(bad)  # a compacted batch may look like this
    with pytest.raises(InvalidRecordCountError):
        validate_produced_batch(bad)


def test_produced_batch_with_fewer_offsets_than_records_is_rejected(batch):
    header = read_header(batch)
    bad = patch_header(batch, last_offset_delta=header.last_offset_delta - 1)

    with pytest.raises(InvalidRecordCountError):
        validate_produced_batch(bad)


def test_record_count_above_the_offset_span_is_rejected(batch):
    header = read_header(batch)
    bad = patch_header(batch, record_count=header.last_offset_delta + 2)

    with pytest.raises(InvalidRecordCountError):
        validate_batch(bad)


@pytest.mark.parametrize(("field", "value"), [("record_count", -1), ("last_offset_delta", -1)])
def test_negative_count_or_offset_delta_is_rejected(batch, field, value):
    with pytest.raises(InvalidRecordCountError):
        validate_batch(patch_header(batch, **{field: value}))


def test_empty_produced_batch_is_rejected(batch):
    empty = with_payload(patch_header(batch, record_count=0, last_offset_delta=0), b"")

    validate_batch(empty)
    with pytest.raises(InvalidRecordCountError):
        validate_produced_batch(empty)


@pytest.mark.parametrize("declared_delta", [-1, +1])
def test_record_count_disagreeing_with_the_records_present_fails_iteration(batch, declared_delta):
    header = read_header(batch)
    n = header.record_count + declared_delta
    bad = patch_header(batch, record_count=n, last_offset_delta=n - 1)

    validate_produced_batch(bad)  # the header alone is consistent
    with pytest.raises(InvalidRecordCountError):
        list(iter_records(bad))


# ── offsets ────────────────────────────────────────────────────────────────────


def test_assigning_offsets_past_int64_is_an_overflow(batch):
    header = read_header(batch)
    buf = bytearray(batch)

    with pytest.raises(OffsetOverflowError):
        assign_offsets(buf, 2**63 - header.last_offset_delta, header)
    assert bytes(buf) == batch  # nothing was patched


def test_assigning_the_last_offsets_that_fit_in_int64_is_allowed(batch):
    header = read_header(batch)
    buf = bytearray(batch)

    patched = assign_offsets(buf, 2**63 - 1 - header.last_offset_delta, header)

    assert patched.last_offset == 2**63 - 1
    assert validate_produced_batch(buf) == patched


@pytest.mark.parametrize("base_offset", [2**63 - 2, -1, -(2**63)])
def test_batch_whose_offsets_leave_the_int64_range_is_rejected(batch, base_offset):
    bad = bytearray(batch)
    bad[:8] = base_offset.to_bytes(8, "big", signed=True)

    with pytest.raises(OffsetOverflowError):
        validate_batch(bad)


# ── records and compression ────────────────────────────────────────────────────


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_corrupt_compressed_payload_is_a_corrupt_record_error(codec, damage):
    good = build_batch(many_records(200), compression=codec)
    compressed = good[HEADER_SIZE:]
    payload = compressed[: len(compressed) // 2] if damage == "truncated" else b"\xfe" * 80
    bad = with_payload(good, payload)

    validate_produced_batch(bad)  # framing and CRC are fine; the payload is not
    with pytest.raises(CorruptRecordError):
        list(iter_records(bad))
    with pytest.raises(CorruptRecordError):
        count_records(bad)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\x80", id="length-varint-cut"),
        pytest.param(b"\x40" + b"\x00" * 10, id="length-beyond-payload"),
        pytest.param(b"\x03" + b"\x00" * 5, id="negative-length"),
    ],
)
def test_record_overrunning_the_payload_is_a_corrupt_record(batch, payload):
    bad = with_payload(patch_header(batch, record_count=1, last_offset_delta=0), payload)

    with pytest.raises(CorruptRecordError):
        list(iter_records(bad))
    with pytest.raises(CorruptRecordError):
        count_records(bad)


def test_record_whose_fields_disagree_with_its_length_is_a_corrupt_record(batch):
    record = bytearray(encode_record(0, 0, NewRecord(b"value", key=b"key")))
    record[0] += 2  # length prefix claims two more bytes than the fields use
    bad = with_payload(patch_header(batch, record_count=1, last_offset_delta=0), bytes(record) + b"\x00\x00")

    with pytest.raises(CorruptRecordError, match="length prefix"):
        list(iter_records(bad))


def test_header_name_that_is_not_utf8_is_a_corrupt_record(batch):
    record = encode_record(0, 0, NewRecord(b"v", headers=(("ab", b"x"),)))
    record = record.replace(b"ab", b"\xff\xfe")
    bad = with_payload(patch_header(batch, record_count=1, last_offset_delta=0), record)

    with pytest.raises(CorruptRecordError, match="UTF-8"):
        list(iter_records(bad))


def test_header_with_a_null_name_is_a_corrupt_record(batch):
    record = encode_record(0, 0, NewRecord(b"v", headers=(("n", b"x"),)))
    record = record.replace(b"\x02n\x02x", b"\x01\x02x\x00")  # name length -1
    bad = with_payload(patch_header(batch, record_count=1, last_offset_delta=0), record)

    with pytest.raises(CorruptRecordError, match="null name"):
        list(iter_records(bad))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_compression_codec_is_unsupported(batch, codec_id):
    bad = patch_header(batch, attributes=codec_id)

    header = validate_batch(bad)  # framing is fine; only the codec is unknown
    with pytest.raises(UnsupportedCompressionError):
        _ = header.compression
    with pytest.raises(UnsupportedCompressionError):
        list(iter_records(bad))
    with pytest.raises(UnsupportedCompressionError):
        count_records(bad)


# ── fuzzing ────────────────────────────────────────────────────────────────────


def _only_records_errors(buf: bytes | bytearray) -> None:
    """Run every reader over ``buf``: any failure must be a RecordsError."""
    for read in (validate_batch, validate_produced_batch, lambda b: list(iter_records(b)), count_records):
        with contextlib.suppress(RecordsError):
            read(buf)


mutations = st.lists(
    st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), min_size=1, max_size=6
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists, codec=codecs, changes=mutations, fix_crc=st.booleans())
def test_mutated_batch_raises_nothing_but_records_errors(records, codec, changes, fix_crc):
    buf = bytearray(build_batch(records, compression=codec))
    for index, byte in changes:
        buf[index % len(buf)] = byte
    if fix_crc:
        recompute_crc(buf)  # let the damage reach the record decoder through validation

    _only_records_errors(buf)


@settings(max_examples=150, deadline=None)
@given(records=record_lists, codec=codecs, cut=st.integers(min_value=0), fix_header=st.booleans())
def test_truncated_or_extended_batch_raises_nothing_but_records_errors(records, codec, cut, fix_header):
    batch = build_batch(records, compression=codec)
    payload = batch[HEADER_SIZE:]
    cut %= len(payload) + 1
    damaged = with_payload(batch, payload[:cut]) if fix_header else bytearray(batch[: HEADER_SIZE + cut])

    _only_records_errors(damaged)
    _only_records_errors(damaged + b"\x00" * (cut % 7))


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(list(Compression)), payload=st.binary(max_size=200))
def test_arbitrary_payload_raises_nothing_but_records_errors(codec, payload):
    bad = with_payload(patch_header(SAMPLE_BATCH, attributes=int(codec)), payload)

    _only_records_errors(bad)
