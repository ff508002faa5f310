"""The four batch compression codecs of Kafka, through cramjam.

The codec id sits in bits 0-2 of the batch attributes. What is compressed is the
concatenation of the batch's records (everything after the 61-byte header).

Snappy needs care: the Java client writes xerial framing (a 16-byte header
``\\x82SNAPPY\\x00`` + version + compat, then blocks of ``length i32`` + raw snappy),
while librdkafka writes one raw snappy block. Decompression accepts both; compression
writes xerial framing in 32 KiB blocks, what Java and kafka-python write.

Decompression is bounded: :func:`decompress` is the only way logtrove decompresses
(every reader gets a batch's records through :func:`logtrove.records.record.batch_payload`),
and it never produces more than ``limit`` bytes (nor holds more than twice that, the
result included). A 34 KB zstd batch can hold 1 GiB of zeros; past the limit it raises
:class:`DecompressionLimitError` instead of growing the process. gzip, lz4 and zstd
decompress into a buffer sized from the size the frame declares (:func:`_declared_size`;
else 8 × the input), doubled while it fills, up to ``limit + 1`` bytes (cramjam's
``decompress_into`` stops with "failed to write whole buffer" when its output is full,
having written no more than the buffer); snappy blocks state their decompressed length
up front, which is checked before any work.

The default limit, :data:`DEFAULT_MAX_DECOMPRESSED_BYTES` (64 MiB), is
:func:`decompressed_limit` of Kafka's default ``max.message.bytes`` (1 MiB): a batch may
decompress to :data:`DECOMPRESSION_RATIO` (64) times its topic's largest batch, and never
less than 64 MiB. Real record data compresses 3-20 times (repetitive logs up to ~50),
so real batches stay far below it, while one request can no longer cost gigabytes.
The produce check, the indexer and the cleaner use their topic's limit; readers that
only hold bytes (HTTP and query reads, Spark, ``dump-log``, ``consume``) the default.
"""

from __future__ import annotations

import enum
import struct
import threading
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
_LARGE_BUFFER = 16 << 20
_LARGE_BUFFERS = threading.Lock()


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
    ``limit + 1`` bytes is over the limit (see the module doc). Buffers above
    :data:`_LARGE_BUFFER` are taken one thread at a time, so that a process decompressing
    bombs in several threads (HTTP reads, the cleaner) holds one limit-sized buffer."""
    declared = _declared_size(codec, data)
    guess = max(_FIRST_GUESS_MIN, _FIRST_GUESS_RATIO * len(data)) if declared is None else declared + 1
    size = min(limit + 1, guess)
    holding = False
    try:
        while True:
            if size > _LARGE_BUFFER and not holding:
                holding = _LARGE_BUFFERS.acquire()
            out = bytearray(size)
            try:
                written = decompress_into(data, out)
            except cramjam.DecompressionError as exc:
                if _OUTPUT_FULL not in str(exc):
                    raise
                written = size
            if written < size:
                return bytes(memoryview(out)[:written])
            if size > limit:
                raise DecompressionLimitError(
                    f"{codec.name.lower()} payload decompresses to more than {limit} bytes "
                    "(the limit is max(64 MiB, 64 × max.message.bytes))"
                )
            size = min(limit + 1, 2 * size)
            del out  # before the next allocation: at most one buffer is alive
    finally:
        if holding:
            _LARGE_BUFFERS.release()


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_GZIP_MAGIC = b"\x1f\x8b"


def _declared_size(codec: Compression, data: bytes | memoryview) -> int | None:
    """The decompressed size the payload's first frame states, when it states one: only
    a hint for the first buffer (a wrong one costs a retry, never more than ``limit``).

    zstd: Frame_Content_Size of the frame header (RFC 8878 3.1.1.1); lz4: Content Size
    of the frame descriptor, else blocks × block maximum size (:func:`_lz4_bound`); gzip: ISIZE, the last 4 bytes (size mod 2**32).
    """
    head = bytes(data[:18])
    if codec is Compression.ZSTD and head.startswith(_ZSTD_MAGIC) and len(head) >= 6:
        fhd = head[4]
        single = (fhd >> 5) & 1
        fcs_size = (1 if single else 0, 2, 4, 8)[fhd >> 6]
        pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
        if fcs_size == 0 or len(head) < pos + fcs_size:
            return None
        value = int.from_bytes(head[pos : pos + fcs_size], "little")
        return value + 256 if fcs_size == 2 else value
    if codec is Compression.LZ4 and head.startswith(_LZ4_MAGIC):
        return _lz4_bound(bytes(data))
    if codec is Compression.GZIP and head.startswith(_GZIP_MAGIC) and len(data) >= 18:
        return int.from_bytes(bytes(data[-4:]), "little")
    return None


_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_LZ4_BLOCK_SIZE = struct.Struct("<I")


def _lz4_bound(data: bytes) -> int | None:
    """An upper bound of what an lz4 frame (or frames, back to back) decompresses to,
    from the frame headers and block sizes alone: each block holds at most the frame's
    block maximum size. librdkafka and cramjam write frames without a content size."""
    pos = total = 0
    while pos + 7 <= len(data) and data[pos : pos + 4] == _LZ4_MAGIC:
        flg, bd = data[pos + 4], data[pos + 5]
        if flg & 0x08:
            return int.from_bytes(data[pos + 6 : pos + 14], "little")
        block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07)
        if block_max is None:
            return None
        pos += 7 + (4 if flg & 0x01 else 0)  # magic, FLG, BD, header checksum, dictionary id
        while pos + 4 <= len(data):
            (size,) = _LZ4_BLOCK_SIZE.unpack_from(data, pos)
            pos += 4
            if size == 0:
                break
            pos += (size & 0x7FFFFFFF) + (4 if flg & 0x10 else 0)
            total += block_max
        pos += 4 if flg & 0x04 else 0  # content checksum
    return total


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
