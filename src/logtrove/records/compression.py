"""The four batch compression codecs of Kafka, through cramjam.

The codec id sits in bits 0-2 of the batch attributes. What is compressed is the
concatenation of the batch's records (everything after the 61-byte header).

Snappy needs care: the Java client writes xerial framing (a 16-byte header
``\\x82SNAPPY\\x00`` + version + compat, then blocks of ``length i32`` + raw snappy),
while librdkafka writes one raw snappy block. Decompression accepts both; compression
writes xerial framing in 32 KiB blocks, what Java and kafka-python write.
"""

from __future__ import annotations

import enum
import struct

import cramjam

from logtrove.records.errors import CorruptRecordError, UnsupportedCompressionError


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_attributes(cls, attributes: int) -> Compression:
        codec = attributes & 0x07
        try:
            return cls(codec)
        except ValueError:
            raise UnsupportedCompressionError(f"unknown compression codec id {codec}") from None

    @classmethod
    def parse(cls, name: str) -> Compression:
        """``"gzip"`` → ``Compression.GZIP``; accepts ``none`` and the four codec names."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            names = ", ".join(c.name.lower() for c in cls)
            raise ValueError(f"unknown compression {name!r}; expected one of {names}") from None


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_LEN = struct.Struct(">i")
_XERIAL_BLOCK_SIZE = 32 * 1024


def compress(codec: Compression, data: bytes) -> bytes:
    """Compress a batch payload with ``codec`` (a :class:`Compression` or its int id)."""
    codec = Compression(codec)
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec is Compression.SNAPPY:
        return _xerial_compress(data)
    if codec is Compression.LZ4:
        return _lz4_compress(data)
    if codec is Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompressionError(f"unknown compression codec {codec!r}")


def decompress(codec: Compression, data: bytes | memoryview) -> bytes:
    """Decompress a batch payload; a codec failure is a :class:`CorruptRecordError`."""
    codec = Compression(codec)
    if codec is Compression.NONE:
        return bytes(data)
    try:
        if codec is Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec is Compression.SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec is Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec is Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"{codec.name.lower()} payload does not decompress: {exc}") from exc
    raise UnsupportedCompressionError(f"unknown compression codec {codec!r}")


def _xerial_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK_SIZE]))
        out += _XERIAL_BLOCK_LEN.pack(len(block))
        out += block
    return bytes(out)


def _lz4_compress(data: bytes) -> bytes:
    # Kafka's Java reader (Lz4BlockInputStream) decompresses each 64 KiB block on its
    # own, so blocks must not refer back to earlier ones; cramjam's default links them.
    compressor = cramjam.lz4.Compressor(block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    pos = _XERIAL_HEADER.size
    out = bytearray()
    while pos < len(data):
        if pos + _XERIAL_BLOCK_LEN.size > len(data):
            raise CorruptRecordError("snappy xerial block header is truncated")
        (length,) = _XERIAL_BLOCK_LEN.unpack_from(data, pos)
        pos += _XERIAL_BLOCK_LEN.size
        if length < 0 or pos + length > len(data):
            raise CorruptRecordError("snappy xerial block is truncated")
        out += cramjam.snappy.decompress_raw(data[pos : pos + length])
        pos += length
    return bytes(out)
