"""Zig-zag varints as used inside Kafka records (protobuf style, little-endian groups of 7 bits).

A signed value ``n`` is stored as ``(n << 1) ^ (n >> 63)`` so that small negative numbers
(``-1`` for a null key) take one byte. The same formula serves 32-bit varints and
64-bit varlongs: the two only differ in the range the reader accepts.
"""

from __future__ import annotations

from logtrove.records.errors import CorruptRecordError

_MAX_VARLONG_BYTES = 10


def encode_varint(value: int) -> bytes:
    """Encode a signed integer as a zig-zag varint."""
    n = (value << 1) ^ (value >> 63)
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``; return ``(value, position after it)``.

    Raises :class:`CorruptRecordError` when the buffer ends inside the varint or the
    varint is longer than 10 bytes.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
            if shift >= 7 * _MAX_VARLONG_BYTES:
                raise CorruptRecordError("varint longer than 10 bytes")
    except IndexError:
        raise CorruptRecordError("record ends inside a varint") from None


_U64 = (1 << 64) - 1


def varint_below(b: bytes | bytearray | memoryview, end: int, p: int) -> tuple[int | None, int]:
    """A zig-zag varint of at most 10 bytes below ``end``, 64 bits kept and wrapped as
    ``varint.h`` reads it (the compiled walks' rule, which their pure-Python twins must
    match byte for byte); ``(None, p)`` if it does not fit. Never raises: the twins turn
    ``None`` into their own error at the record it belongs to."""
    if p < end and b[p] < 0x80:  # most varints in a record are one byte
        c = b[p]
        return (c >> 1) ^ -(c & 1), p + 1
    r = shift = 0
    while shift < 70:
        if p >= end:
            return None, p
        c = b[p]
        p += 1
        r |= (c & 0x7F) << shift
        if c < 0x80:
            r &= _U64
            return (r >> 1) ^ -(r & 1), p
        shift += 7
    return None, p
