"""Records inside a batch: decoding and encoding.

One record (after the batch payload has been decompressed)::

    ┌────────────────────┬───────────────────────────────────────────────┐
    │ length       varint│ bytes that follow                             │
    │ attributes   i8    │ unused, 0                                     │
    │ timestampDelta varlong  relative to the batch's baseTimestamp      │
    │ offsetDelta  varint│ relative to the batch's baseOffset            │
    │ keyLength    varint│ -1 = null key                                 │
    │ key          bytes │                                               │
    │ valueLength  varint│ -1 = null value (a tombstone)                 │
    │ value        bytes │                                               │
    │ headerCount  varint│                                               │
    │ headers      …     │ each: keyLength varint, key (UTF-8),          │
    │                    │       valueLength varint (-1 = null), value   │
    └────────────────────┴───────────────────────────────────────────────┘

Decoding is pure Python and costs about 2-3 µs a record: it belongs off the produce and
fetch paths (indexer, query verification, cleaner, CLI).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from logtrove.records.batch import (
    ATTR_TIMESTAMP_TYPE,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    read_header,
)
from logtrove.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression, decompress
from logtrove.records.errors import CorruptRecordError, InvalidRecordCountError
from logtrove.records.varint import decode_varint, encode_varint

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp (ms)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    def header(self, name: str) -> bytes | None:
        """Value of the last header called ``name``, or ``None``."""
        found: bytes | None = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to be encoded; offsets are positional inside the batch.

    ``timestamp`` is epoch milliseconds; ``None`` lets the builder use "now".
    """

    value: bytes | None
    key: bytes | None = None
    headers: Headers = field(default=())
    timestamp: int | None = None


def batch_payload(
    buf: Buffer, header: BatchHeader, pos: int = 0, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> bytes | memoryview:
    """The decompressed concatenation of a batch's records, at most ``limit`` bytes
    (:class:`~logtrove.records.errors.DecompressionLimitError` past it)."""
    raw = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    codec = header.compression
    if codec is Compression.NONE:
        return raw
    return decompress(codec, raw, limit)


def iter_records(
    buf: Buffer, pos: int = 0, header: BatchHeader | None = None, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> Iterator[Record]:
    """Decode every record of the batch at ``pos`` (CRC is not re-checked here), its
    records decompressed to at most ``limit`` bytes.

    In a LogAppendTime batch every record's timestamp is the batch's ``maxTimestamp``
    (the broker's append time), as Kafka's readers report it.

    Raises :class:`CorruptRecordError` if a record is malformed and
    :class:`InvalidRecordCountError` if fewer or more records are present than
    ``recordCount`` says.
    """
    if header is None:
        header = read_header(buf, pos)
    payload = batch_payload(buf, header, pos, limit)
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    append_time = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
    end = len(payload)
    p = 0
    count = 0
    while p < end:
        length, p = decode_varint(payload, p)
        record_end = p + length
        if length < 0 or record_end > end:
            raise CorruptRecordError(f"record {count} overruns the batch payload")
        try:
            p += 1  # attributes
            ts_delta, p = decode_varint(payload, p)
            offset_delta, p = decode_varint(payload, p)
            key_len, p = decode_varint(payload, p)
            key = None
            if key_len >= 0:
                key = bytes(payload[p : p + key_len])
                p += key_len
            value_len, p = decode_varint(payload, p)
            value = None
            if value_len >= 0:
                value = bytes(payload[p : p + value_len])
                p += value_len
            n_headers, p = decode_varint(payload, p)
            headers: Headers = ()
            if n_headers:
                headers, p = _decode_headers(payload, p, n_headers)
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record {count} has a header name that is not UTF-8") from exc
        if p != record_end:
            raise CorruptRecordError(f"record {count} length prefix disagrees with its fields")
        count += 1
        timestamp = base_ts + ts_delta if append_time is None else append_time
        yield Record(base_offset + offset_delta, timestamp, key, value, headers)
    if count != header.record_count:
        raise InvalidRecordCountError(
            f"batch at offset {base_offset} declares {header.record_count} records, holds {count}"
        )


def record_span(payload: Buffer, header: BatchHeader, min_offset: int) -> tuple[int, int, int] | None:
    """``(offset, start, end)`` of the first record of a batch's decompressed ``payload``
    whose offset is ≥ ``min_offset``: ``payload[start:end]`` is the record, length prefix
    included. ``None`` when every record is below it. Nothing is decoded but lengths and
    offset deltas, so a point lookup costs one varint per record skipped instead of a
    decoded :class:`Record` each.

    A batch with one record per offset (``recordCount == lastOffsetDelta + 1``: every
    produced batch, whose record ``i`` has offset delta ``i`` as produce validation
    checks) is skipped into by record count; the delta found there is checked, and any
    other batch (compacted) or a mismatch walks the offset deltas one by one.
    """
    want = min_offset - header.base_offset
    end = len(payload)
    if 0 < want < header.record_count == header.last_offset_delta + 1:
        p = 0
        try:
            for _ in range(want):  # the length varint, its 1- and 2-byte forms inline
                b = payload[p]
                if b < 0x80:
                    p += 1 + ((b >> 1) ^ -(b & 1))
                    continue
                c = payload[p + 1]
                if c < 0x80:
                    n = (b & 0x7F) | (c << 7)
                    p += 2 + ((n >> 1) ^ -(n & 1))
                    continue
                length, p = decode_varint(payload, p)
                p += length
        except IndexError:
            p = end  # a length ran past the payload: the walk below reports it
        if 0 <= p < end:
            length, start = decode_varint(payload, p)
            _, q = decode_varint(payload, start + 1)  # timestamp delta
            delta, _ = decode_varint(payload, q)
            if delta == want and start + length <= end:
                return header.base_offset + delta, p, start + length
    p = 0
    while p < end:
        length, start = decode_varint(payload, p)
        _, q = decode_varint(payload, start + 1)  # timestamp delta
        delta, _ = decode_varint(payload, q)
        if delta >= want:
            if length < 0 or start + length > end:
                raise CorruptRecordError("record overruns the batch payload")
            return header.base_offset + delta, p, start + length
        p = start + length
    return None


def timestamp_bounds(payload: Buffer, header: BatchHeader) -> tuple[int, int]:
    """The smallest and largest record timestamp of a batch, as :func:`iter_records`
    reports them, from its decompressed ``payload``: only each record's length prefix and
    timestamp delta are read (a batch's header bounds the largest timestamp, not the
    smallest: clients stamp records out of order)."""
    if header.attributes & ATTR_TIMESTAMP_TYPE:
        return header.max_timestamp, header.max_timestamp
    end = len(payload)
    p = 0
    lo = hi = None
    while p < end:
        length, start = decode_varint(payload, p)
        if length < 2 or start + length > end:
            raise CorruptRecordError("record overruns the batch payload")
        delta, _ = decode_varint(payload, start + 1)
        if lo is None or delta < lo:
            lo = delta
        if hi is None or delta > hi:
            hi = delta
        p = start + length
    if lo is None or hi is None:
        raise CorruptRecordError("batch holds no record")
    return header.base_timestamp + lo, header.base_timestamp + hi


def decode_record(raw: Buffer, header: BatchHeader) -> Record:
    """Decode one record of the batch ``header`` (its bytes, length prefix included, as
    :func:`record_span` delimits them) exactly as :func:`iter_records` would: it is
    wrapped in a minimal uncompressed batch of one record."""
    one = header._replace(
        record_count=1,
        attributes=header.attributes & ~0x07,
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(raw),
    )
    return next(iter_records(bytes(HEADER_SIZE) + bytes(raw), 0, one))


def iter_keys(
    buf: Buffer, pos: int = 0, header: BatchHeader | None = None, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(offset, key, is_tombstone)`` of every record, skipping values and headers by
    their lengths: about half the cost of :func:`iter_records`, for the cleaner's map and
    keep/drop decisions."""
    if header is None:
        header = read_header(buf, pos)
    payload = batch_payload(buf, header, pos, limit)
    base_offset = header.base_offset
    end = len(payload)
    p = 0
    count = 0
    while p < end:
        length, p = decode_varint(payload, p)
        record_end = p + length
        if length < 0 or record_end > end:
            raise CorruptRecordError(f"record {count} overruns the batch payload")
        _, p = decode_varint(payload, p + 1)  # timestamp delta
        offset_delta, p = decode_varint(payload, p)
        key_len, p = decode_varint(payload, p)
        key = None
        if key_len >= 0:
            key = bytes(payload[p : p + key_len])
            p += key_len
        value_len, p = decode_varint(payload, p)
        if p > record_end:
            raise CorruptRecordError(f"record {count} fields overrun its length")
        count += 1
        yield base_offset + offset_delta, key, value_len < 0
        p = record_end
    if count != header.record_count:
        raise InvalidRecordCountError(
            f"batch at offset {base_offset} declares {header.record_count} records, holds {count}"
        )


def count_records(buf: Buffer, pos: int = 0, header: BatchHeader | None = None) -> int:
    """Count records by their length prefixes only (no field decoding)."""
    if header is None:
        header = read_header(buf, pos)
    payload = batch_payload(buf, header, pos)
    end = len(payload)
    p = 0
    count = 0
    while p < end:
        length, p = decode_varint(payload, p)
        if length < 0 or p + length > end:
            raise CorruptRecordError(f"record {count} overruns the batch payload")
        p += length
        count += 1
    return count


def _decode_headers(payload: Buffer, p: int, n: int) -> tuple[Headers, int]:
    if n < 0:
        raise CorruptRecordError(f"negative header count {n}")
    out: list[tuple[str, bytes | None]] = []
    for _ in range(n):
        klen, p = decode_varint(payload, p)
        if klen < 0:
            raise CorruptRecordError("header with a null name")
        name = bytes(payload[p : p + klen]).decode("utf-8")
        p += klen
        vlen, p = decode_varint(payload, p)
        hval = None
        if vlen >= 0:
            hval = bytes(payload[p : p + vlen])
            p += vlen
        out.append((name, hval))
    return tuple(out), p


def encode_record(offset_delta: int, timestamp_delta: int, record: NewRecord | Record) -> bytes:
    """Encode one record, length prefix included."""
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta)]
    _append_bytes(parts, record.key)
    _append_bytes(parts, record.value)
    parts.append(encode_varint(len(record.headers)))
    for name, hval in record.headers:
        _append_bytes(parts, name.encode("utf-8"))
        _append_bytes(parts, hval)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _append_bytes(parts: list[bytes], data: bytes | None) -> None:
    if data is None:
        parts.append(b"\x01")  # zig-zag of -1
    else:
        parts.append(encode_varint(len(data)))
        parts.append(data)
