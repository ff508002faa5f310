"""The four batch compression codecs of Kafka, through cramjam.

The codec id sits in bits 0-2 of the batch attributes. What is compressed is the
concatenation of the batch's records (everything after the 61-byte header).

Snappy needs care: the Java client writes xerial framing (a 16-byte header
``\\x82SNAPPY\\x00`` + version + compat, then blocks of ``length i32`` + raw snappy),
while librdkafka writes one raw snappy block. Decompression accepts both; compression
writes xerial framing in 32 KiB blocks, what Java and kafka-python write.

Decompression is bounded: :func:`decompress` is the only way logtrove decompresses
(every reader gets a batch's records through :func:`logtrove.records.record.batch_payload`),
and it never produces, nor allocates, more than ``limit`` bytes. A 34 KB zstd batch can
hold 1 GiB of zeros; past the limit it raises :class:`DecompressionLimitError` instead of
growing the process. gzip, lz4 and zstd decompress into a buffer that doubles from an
estimate up to ``limit + 1`` bytes (cramjam's ``decompress_into`` stops with "failed to
write whole buffer" when its output is full, having written no more than the buffer);
snappy blocks state their decompressed length up front, which is checked before any work.

The default limit, :data:`DEFAULT_MAX_DECOMPRESSED_BYTES` (64 MiB), is
:func:`decompressed_limit` of Kafka's default ``max.message.bytes`` (1 MiB): a batch may
decompress to :data:`DECOMPRESSION_RATIO` (64) times its topic's largest batch, and never
less than 64 MiB. Real record data compresses 3-20 times (repetitive logs up to ~50),
so real batches stay far below it, while one request can no longer cost gigabytes.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Any

import cramjam

from logtrove.records.errors import CorruptRecordError, DecompressionLimitError, UnsupportedCompressionError

MIN_DECOMPRESSED_BYTES = 64 << 20
DECOMPRESSION_RATIO = 64
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


def decompressed_limit(max_message_bytes: int) -> int:
    """How many bytes a batch of a topic with this ``max.message.bytes`` may decompress
    to: ``max(64 MiB, 64 × max.message.bytes)`` (see the module doc)."""
    return max(MIN_DECOMPRESSED_BYTES, DECOMPRESSION_RATIO * max_message_bytes)


DEFAULT_MAX_DECOMPRESSED_BYTES = decompressed_limit(KAFKA_DEFAULT_MAX_MESSAGE_BYTES)
_FIRST_GUESS_RATIO = 8
_FIRST_GUESS_MIN = 64 << 10
_OUTPUT_FULL = "failed to write whole buffer"


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


def decompress(
    codec: Compression, data: bytes | memoryview, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> bytes:
    """Decompress a batch payload to at most ``limit`` bytes.

    Raises :class:`CorruptRecordError` when the payload does not decompress with its codec
    and :class:`DecompressionLimitError` (a subclass) when it would exceed ``limit``.
    """
    codec = Compression(codec)
    if codec is Compression.NONE:
        return bytes(data)
    try:
        if codec is Compression.SNAPPY:
            return _snappy_decompress(bytes(data), limit)
        module = {
            Compression.GZIP: cramjam.gzip,
            Compression.LZ4: cramjam.lz4,
            Compression.ZSTD: cramjam.zstd,
        }
        return _bounded(codec, module[codec].decompress_into, data, limit)
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"{codec.name.lower()} payload does not decompress: {exc}") from exc


def _bounded(
    codec: Compression, decompress_into: Callable[[Any, bytearray], int], data: bytes | memoryview, limit: int
) -> bytes:
    """Decompress into a buffer that doubles up to ``limit + 1`` bytes: output that fills
    ``limit + 1`` bytes is over the limit (see the module doc)."""
    size = min(limit + 1, max(_FIRST_GUESS_MIN, _FIRST_GUESS_RATIO * len(data)))
    while True:
        out = bytearray(size)
        try:
            written = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if _OUTPUT_FULL not in str(exc):
                raise
            written = size
        if written < size:
            del out[written:]
            return bytes(out)
        if size > limit:
            raise DecompressionLimitError(
                f"{codec.name.lower()} payload decompresses to more than {limit} bytes "
                "(the limit is max(64 MiB, 64 × max.message.bytes))"
            )
        size = min(limit + 1, 2 * size)
        del out  # before the next allocation: at most one buffer is alive


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


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        _check_snappy_length(data, 0, limit)
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
        block = data[pos : pos + length]
        _check_snappy_length(block, len(out), limit)
        out += cramjam.snappy.decompress_raw(block)
        pos += length
    return bytes(out)


def _check_snappy_length(block: bytes, before: int, limit: int) -> None:
    """A raw snappy block starts with its decompressed length: refuse it before work."""
    if before + cramjam.snappy.decompress_raw_len(block) > limit:
        raise DecompressionLimitError(f"snappy payload decompresses to more than {limit} bytes")
