"""Produce-time validation: the compiled record walk and its pure-Python twin agree on
valid and hostile payloads, each malformed kind is refused with its own error, and
decompression stops at its limit without allocating past it."""

from __future__ import annotations

import resource
import struct

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.records.helpers import COMPRESSED_CODECS, patch_header, with_payload, zeros_frame, zstd_zeros

from logtrove.records import (
    Compression,
    CorruptRecordError,
    DecompressionLimitError,
    InvalidRecordCountError,
    NewRecord,
    UnsupportedCompressionError,
    build_batch,
    read_header,
)
from logtrove.records.compression import compress, decompress
from logtrove.records.record import batch_payload, encode_record
from logtrove.records.varint import encode_varint
from logtrove.records.walk import MAX_KEYLESS_REPORTED, NATIVE, py_walk, validate_produced

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_compiled_walk_is_built() -> None:
    assert NATIVE is not None, "logtrove.records._walk is missing: install gcc, then `make install`"


def both(payload: bytes) -> object:
    """What each twin gives: the same value or the same ValueError message."""
    assert NATIVE is not None
    results = []
    for walk in (py_walk, NATIVE.walk):
        try:
            results.append(walk(payload))
        except ValueError as exc:
            results.append(f"ValueError: {exc}")
    assert results[0] == results[1], results
    return results[0]


records = st.builds(
    NewRecord,
    value=st.one_of(st.none(), st.binary(max_size=60)),
    key=st.one_of(st.none(), st.binary(max_size=20)),
    headers=st.lists(
        st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))), max_size=3
    ).map(tuple),
    timestamp=st.integers(0, 2**41),
)


@SETTINGS
@given(st.lists(records, min_size=1, max_size=20))
def test_twins_agree_on_valid_payloads(recs: list[NewRecord]) -> None:
    batch = build_batch(recs)
    payload = bytes(batch_payload(batch, read_header(batch)))
    keyless = [i for i, r in enumerate(recs) if r.key is None]
    assert both(payload) == (len(recs), len(keyless), tuple(keyless))


def test_the_twins_cap_the_same_number_of_keyless_records() -> None:
    from logtrove.records import _walk

    assert _walk.MAX_KEYLESS_REPORTED == MAX_KEYLESS_REPORTED


def payload_of(recs: list[NewRecord]) -> bytes:
    batch = build_batch(recs)
    return bytes(batch_payload(batch, read_header(batch)))


@pytest.mark.parametrize("n", [MAX_KEYLESS_REPORTED - 1, MAX_KEYLESS_REPORTED, 3 * MAX_KEYLESS_REPORTED + 7])
def test_twins_name_every_keyless_record_up_to_the_cap(n: int) -> None:
    recs = [NewRecord(b"v", key=None if i % 3 else b"k") for i in range(n)]
    keyless = [i for i in range(n) if i % 3]
    assert both(payload_of(recs)) == (n, len(keyless), tuple(keyless[:MAX_KEYLESS_REPORTED]))


def test_a_batch_of_only_keyless_records_names_the_first_ones() -> None:
    n = 2 * MAX_KEYLESS_REPORTED + 1
    assert both(payload_of([NewRecord(b"") for _ in range(n)])) == (n, n, tuple(range(MAX_KEYLESS_REPORTED)))


def test_a_malformed_record_after_keyless_ones_is_still_refused() -> None:
    payload = payload_of([NewRecord(b"v") for _ in range(MAX_KEYLESS_REPORTED + 5)])
    result = both(payload + encode_varint(10_000))
    assert isinstance(result, str) and f"record {MAX_KEYLESS_REPORTED + 5} " in result


@SETTINGS
@given(st.lists(records, min_size=1, max_size=8), st.data())
def test_twins_agree_on_damaged_payloads(recs: list[NewRecord], data: st.DataObject) -> None:
    batch = build_batch(recs)
    payload = bytearray(batch_payload(batch, read_header(batch)))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(payload)))
    both(bytes(payload[:cut]))
    both(bytes(payload))


@SETTINGS
@given(st.binary(max_size=300))
def test_twins_agree_on_random_bytes(payload: bytes) -> None:
    both(payload)


def record_bytes(offset_delta: int, body_tail: bytes = b"") -> bytes:
    body = b"\x00" + encode_varint(0) + encode_varint(offset_delta) + body_tail
    return encode_varint(len(body)) + body


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            encode_record(0, 0, NewRecord(b"a")) + encode_record(0, 0, NewRecord(b"b")),
            "offset delta is 0, expected 1",
        ),
        (
            record_bytes(0, encode_varint(1) + b"k" + encode_varint(-1) + encode_varint(0) + b"zz"),
            "left over",
        ),
        (record_bytes(0, encode_varint(-1) + encode_varint(50) + b"short"), "truncated value"),
        (record_bytes(0, encode_varint(-1) + encode_varint(-1) + encode_varint(-3)), "bad header count"),
        (
            record_bytes(
                0,
                encode_varint(-1)
                + encode_varint(-1)
                + encode_varint(1)
                + encode_varint(2)
                + b"\xff\xfe"
                + encode_varint(-1),
            ),
            "not UTF-8",
        ),
        (
            record_bytes(
                0,
                encode_varint(-1)
                + encode_varint(-1)
                + encode_varint(2**40)
                + encode_varint(0)
                + encode_varint(-1),
            ),
            "truncated header name",
        ),
        (encode_varint(10_000) + b"\x00" * 20, "length runs past"),
        (encode_varint(0), "it is empty"),
    ],
    ids=[
        "offset-delta",
        "trailing",
        "value",
        "header-count",
        "utf8",
        "lying-header-count",
        "length",
        "empty",
    ],
)
def test_each_malformed_record_is_named(payload: bytes, message: str) -> None:
    result = both(payload)
    assert isinstance(result, str) and message in result


def good_batch(codec: Compression = Compression.NONE, n: int = 3) -> bytes:
    return build_batch([NewRecord(f"v{i}".encode(), key=b"k") for i in range(n)], compression=codec)


def test_garbage_record_bodies_with_a_valid_crc_are_refused() -> None:
    batch = with_payload(good_batch(), b"\x07" * 40)
    with pytest.raises(CorruptRecordError, match="malformed"):
        validate_produced(bytes(batch))


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_is_unsupported(codec: int) -> None:
    batch = patch_header(good_batch(), attributes=codec)
    with pytest.raises(UnsupportedCompressionError):
        validate_produced(bytes(batch))


def test_gzip_payload_that_is_not_gzip_is_refused() -> None:
    batch = patch_header(good_batch(), attributes=int(Compression.GZIP))
    with pytest.raises(CorruptRecordError, match="gzip"):
        validate_produced(bytes(batch))


def test_record_count_that_lies_is_refused() -> None:
    batch = patch_header(good_batch(n=3), record_count=5, last_offset_delta=4)
    with pytest.raises(InvalidRecordCountError, match="declares 5 records and holds 3"):
        validate_produced(bytes(batch))


def test_last_offset_delta_that_lies_is_refused() -> None:
    batch = patch_header(good_batch(n=2), record_count=2**31 - 1, last_offset_delta=2**31 - 2)
    with pytest.raises(InvalidRecordCountError):
        validate_produced(bytes(batch))


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_valid_batches_of_every_codec_pass(codec: Compression) -> None:
    checked = validate_produced(good_batch(codec, n=50))
    assert (checked.header.record_count, checked.keyless) == (50, (0, ()))


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_keyless_records_of_every_codec_are_counted_and_named(codec: Compression) -> None:
    recs = [NewRecord(b"v%d" % i, key=None if i in {2, 3, 40} else b"k") for i in range(50)]
    checked = validate_produced(build_batch(recs, compression=codec))
    assert checked.keyless == (3, (2, 3, 40))


# ── bounded decompression ────────────────────────────────────────────────────────


def zeros_bomb(codec: Compression, size: int) -> bytes:
    if codec is Compression.SNAPPY:  # one raw block whose header claims `size` bytes
        length = bytearray()
        while size >= 0x80:  # snappy's length prefix: an unsigned varint
            length.append((size & 0x7F) | 0x80)
            size >>= 7
        return bytes([*length, size]) + bytes(8)
    return zeros_frame(
        {Compression.GZIP: cramjam.gzip, Compression.LZ4: cramjam.lz4, Compression.ZSTD: cramjam.zstd}[codec],
        size,
    )


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name.lower())
def test_decompression_stops_at_the_limit_without_growing_memory(codec: Compression) -> None:
    bomb = zeros_bomb(codec, 256 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(DecompressionLimitError, match="more than 1048576 bytes"):
        decompress(codec, bomb, limit=1 << 20)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 << 10  # well under the 256 MiB the payload holds


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name.lower())
def test_decompression_up_to_the_limit_is_whole(codec: Compression) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    assert decompress(codec, compress(codec, data), limit=len(data)) == data
    with pytest.raises(DecompressionLimitError):
        decompress(codec, compress(codec, data), limit=len(data) - 1)


def test_a_zstd_bomb_batch_is_refused_at_produce() -> None:
    payload = zstd_zeros(1 << 30)
    assert len(payload) < 64 << 10
    template = good_batch(Compression.ZSTD, n=1)
    batch = with_payload(template, payload)
    with pytest.raises(DecompressionLimitError):
        validate_produced(bytes(batch))
    assert struct.unpack_from(">i", batch, 8)[0] + 12 == len(batch)


# -- first_at_or_after: the histogram's cut inside a straddling batch ------------------------
def both_cuts(payload: bytes, base_ts: int, base_offset: int, timestamp: int, min_offset: int) -> object:
    """What each twin of ``first_at_or_after`` gives: the same offset or the same error."""
    from logtrove.records._walk import first_at_or_after as compiled
    from logtrove.records.walk import py_first_at_or_after

    results: list[object] = []
    for cut in (py_first_at_or_after, compiled):
        try:
            results.append(cut(payload, base_ts, base_offset, timestamp, min_offset))
        except ValueError as exc:
            results.append(f"ValueError: {exc}")
    assert results[0] == results[1], results
    return results[0]


@SETTINGS
@given(st.lists(records, min_size=1, max_size=20), st.integers(0, 2**41), st.integers(0, 25))
def test_cut_twins_find_the_first_record_at_or_after(recs: list[NewRecord], ts: int, min_delta: int) -> None:
    batch = build_batch(recs, base_offset=1000)
    header = read_header(batch)
    payload = bytes(batch_payload(batch, header))
    found = both_cuts(payload, header.base_timestamp, 1000, ts, 1000 + min_delta)
    expected = next(
        (1000 + i for i, r in enumerate(recs) if (r.timestamp or 0) >= ts and i >= min_delta), None
    )
    assert found == expected


@SETTINGS
@given(st.binary(max_size=300), st.integers(-(2**40), 2**40))
def test_cut_twins_agree_on_random_bytes(payload: bytes, ts: int) -> None:
    both_cuts(payload, 0, 0, ts, 0)
