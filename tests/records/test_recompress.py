"""Recompressing a batch (a topic's ``compression.type``): every codec to every other
keeps the records, offsets, timestamps and producer fields; damaged input is refused with
a records error, never blessed with a fresh CRC, and never decompressed past the limit."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logtrove.records import (
    Compression,
    CorruptRecordError,
    CrcMismatchError,
    DecompressionLimitError,
    InvalidLengthError,
    NewRecord,
    UnsupportedCompressionError,
    build_batch,
    iter_records,
    read_header,
    recompress_batch,
    validate_produced_batch,
)
from logtrove.records.batch import CODEC_BITS
from logtrove.records.walk import validate_produced

from .helpers import ALL_CODECS, expected_records, patch_header, with_payload, zstd_zeros

PAIRS = [(a, b) for a, b in itertools.product(ALL_CODECS, ALL_CODECS) if a is not b]


def sample(n: int = 40) -> list[NewRecord]:
    return [
        NewRecord(
            b'{"order": %d, "status": "paid", "pad": "xxxxxxxxxxxxxxxx"}' % i,
            None if i % 7 == 3 else b"k%d" % i,
            (("trace", b"t%d" % i),) if i % 2 else (),
            1_700_000_000_000 + 3 * i,
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=lambda c: c.name.lower())
def test_recompressing_keeps_records_and_header_but_codec_length_and_crc(
    source: Compression, target: Compression
) -> None:
    records = sample()
    batch = build_batch(
        records,
        base_offset=17,
        compression=source,
        producer_id=4711,
        producer_epoch=3,
        base_sequence=100,
        partition_leader_epoch=5,
        transactional=True,
        log_append_time=True,
    )
    out = recompress_batch(batch, target)
    before, after = read_header(batch), validate_produced_batch(out)
    assert after.compression is target
    assert after.attributes & ~CODEC_BITS == before.attributes & ~CODEC_BITS
    unchanged = ("batch_length", "crc", "attributes")
    assert after._replace(**dict.fromkeys(unchanged, 0)) == before._replace(**dict.fromkeys(unchanged, 0))
    assert list(iter_records(out)) == list(iter_records(batch))  # LogAppendTime: max timestamp
    assert validate_produced(out).keyless == validate_produced(batch).keyless


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name.lower())
def test_a_batch_already_in_the_codec_is_returned_as_it_is(codec: Compression) -> None:
    batch = build_batch(sample(), compression=codec)
    assert recompress_batch(memoryview(batch), codec) == batch


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.builds(
            NewRecord,
            value=st.one_of(st.none(), st.binary(max_size=200)),
            key=st.one_of(st.none(), st.binary(max_size=20)),
            timestamp=st.integers(0, 2**41),
        ),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from(PAIRS),
)
def test_any_records_survive_recompression(records: list[NewRecord], pair: tuple[Compression, ...]) -> None:
    source, target = pair
    out = recompress_batch(build_batch(records, compression=source), target)
    assert list(iter_records(out)) == expected_records(records)


# ── damaged input ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD, Compression.SNAPPY])
def test_a_payload_that_does_not_decompress_is_a_corrupt_record(codec: Compression) -> None:
    batch = with_payload(build_batch(sample(), compression=codec), b"\x82SNAPPY\x00 not really" * 8)
    with pytest.raises(CorruptRecordError):
        recompress_batch(
            bytes(batch), Compression.ZSTD if codec is not Compression.ZSTD else Compression.GZIP
        )


def test_a_damaged_batch_is_refused_not_given_a_fresh_crc() -> None:
    batch = bytearray(build_batch(sample(), compression=Compression.LZ4))
    batch[-3] ^= 0xFF
    with pytest.raises(CrcMismatchError):
        recompress_batch(bytes(batch), Compression.GZIP)
    with pytest.raises(InvalidLengthError):
        recompress_batch(bytes(batch[:-1]), Compression.GZIP)


def test_a_bomb_is_stopped_at_the_limit() -> None:
    bomb = with_payload(build_batch(sample(1), compression=Compression.ZSTD), zstd_zeros(256 << 20))
    with pytest.raises(DecompressionLimitError):
        recompress_batch(bytes(bomb), Compression.LZ4, limit=1 << 20)


def test_an_unknown_codec_is_unsupported() -> None:
    batch = patch_header(build_batch(sample()), attributes=6)
    with pytest.raises(UnsupportedCompressionError):
        recompress_batch(bytes(batch), Compression.GZIP)
