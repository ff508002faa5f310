"""The compression codecs, checked against the framing Kafka's own readers expect."""

from __future__ import annotations

import random
import struct

import cramjam
import pytest

from logtrove.records import (
    HEADER_SIZE,
    Compression,
    CorruptRecordError,
    UnsupportedCompressionError,
    build_batch,
    iter_records,
    validate_produced_batch,
)
from logtrove.records.compression import compress, decompress

from .helpers import (
    COMPRESSED_CODECS,
    expected_records,
    many_records,
    patch_header,
    with_payload,
)

LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_FLG_BLOCK_INDEPENDENT = 0x20
LZ4_FLG_BLOCK_CHECKSUM = 0x10
LZ4_FLG_CONTENT_SIZE = 0x08
LZ4_UNCOMPRESSED_BLOCK = 0x80000000
LZ4_BLOCK_SIZES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def decode_lz4_like_kafkas_java_reader(frame: bytes) -> bytes:
    """Kafka's Lz4BlockInputStream: each block is decompressed on its own, with no
    window from the previous block, so linked blocks cannot be read."""
    assert frame.startswith(LZ4_MAGIC)
    flg, bd = frame[4], frame[5]
    max_block = LZ4_BLOCK_SIZES[(bd >> 4) & 0x07]
    pos = 6 + (8 if flg & LZ4_FLG_CONTENT_SIZE else 0) + 1  # + descriptor checksum
    out = bytearray()
    while True:
        (size,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if size == 0:
            return bytes(out)
        block = frame[pos : pos + (size & ~LZ4_UNCOMPRESSED_BLOCK)]
        pos += len(block) + (4 if flg & LZ4_FLG_BLOCK_CHECKSUM else 0)
        if size & LZ4_UNCOMPRESSED_BLOCK:
            out += block
        else:
            window = bytearray(max_block)
            n = cramjam.lz4.decompress_block_into(block, window, output_len=max_block)
            out += window[:n]


def repetitive_payload(size: int) -> bytes:
    """Random 3 KB chunk repeated: later blocks can only compress by referring back."""
    chunk = random.Random(7).randbytes(3_000)
    return (chunk * (size // len(chunk) + 1))[:size]


def test_lz4_frames_declare_independent_blocks():
    frame = compress(Compression.LZ4, repetitive_payload(1_000))

    assert frame.startswith(LZ4_MAGIC)
    assert frame[4] & LZ4_FLG_BLOCK_INDEPENDENT


def test_lz4_payload_over_one_block_is_readable_by_kafkas_java_reader():
    # Regression: cramjam.lz4.compress links blocks, which Kafka's Java client and
    # broker (Lz4BlockInputStream) cannot decompress once a payload passes 64 KiB.
    data = repetitive_payload(300_000)

    frame = compress(Compression.LZ4, data)

    assert decode_lz4_like_kafkas_java_reader(frame) == data


def test_snappy_is_written_with_xerial_framing_in_32_kib_blocks():
    data = repetitive_payload(100_000)

    framed = compress(Compression.SNAPPY, data)

    magic, version, compat = struct.unpack_from(">8sii", framed)
    assert (magic, version, compat) == (b"\x82SNAPPY\x00", 1, 1)
    pos, blocks = 16, []
    while pos < len(framed):
        (length,) = struct.unpack_from(">i", framed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [32_768, 32_768, 32_768, 1_696]
    assert b"".join(blocks) == data


def test_raw_snappy_payload_as_librdkafka_writes_it_is_decoded():
    records = many_records(300)
    plain = build_batch(records)
    raw_snappy = bytes(cramjam.snappy.compress_raw(plain[HEADER_SIZE:]))
    batch = bytes(with_payload(patch_header(plain, attributes=Compression.SNAPPY), raw_snappy))

    assert validate_produced_batch(batch).compression is Compression.SNAPPY
    assert list(iter_records(batch)) == expected_records(records)


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_every_codec_round_trips_empty_and_large_payloads(codec):
    for data in (b"", b"x", repetitive_payload(200_000)):
        assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name.lower())
def test_undecompressable_payload_is_a_corrupt_record_error(codec):
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\xff" * 64)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_codec_ids_5_to_7_are_unsupported(codec_id):
    with pytest.raises(UnsupportedCompressionError):
        Compression.from_attributes(codec_id | 0x10)


def test_codec_id_is_read_from_the_low_three_attribute_bits():
    assert Compression.from_attributes(0x08 | 0x10 | 0x20 | 4) is Compression.ZSTD


def test_compression_names_parse_case_insensitively():
    assert Compression.parse(" GZip ") is Compression.GZIP
    assert Compression.parse("none") is Compression.NONE
    with pytest.raises(ValueError, match="expected one of none, gzip, snappy, lz4, zstd"):
        Compression.parse("brotli")
