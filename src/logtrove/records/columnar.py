"""The columnar decoder: records of many batches straight into Arrow buffers.

A :class:`Decoder` is fed the decompressed records section of each batch of a run
(:meth:`Decoder.add`, one call per batch, with the batch's base offset and timestamp,
its LogAppendTime if any, and the offset range to keep) and hands back the columns of
the source (:mod:`logtrove.spark.columns`) as the bytes of Arrow buffers
(:meth:`Decoder.take`), which :func:`logtrove.spark.columns.arrow_batch` wraps without
copying. No Python object is made per record.

Two implementations give the same bytes for the same batches:

* ``logtrove.records._columnar.Decoder``, compiled from ``_columnar.c`` when the package is
  installed with a C compiler (5-10 M records/s on one core, 45-90× the twin);
* :class:`PyDecoder`, pure Python, which defines the behaviour and the formats.

:data:`NATIVE` is the extension when it is used (:mod:`logtrove.native`; the environment
sets ``LOGTROVE_PURE_PYTHON=1`` to force the twin); :data:`IMPLEMENTATION` says which one
runs; :func:`new_decoder` makes one. ``tests/spark/test_columnar.py`` checks both give the same
bytes, and the same errors, for valid, random and damaged batches.

What ``take()`` returns (all integers little-endian, as Arrow on this platform)::

    (rows, offsets, micros, types, key, value, id, tag, headers)

    offsets   int64 per row: the record's offset
    micros    int64 per row: its timestamp in µs (LogAppendTime: the batch's max timestamp)
    types     int32 per row: 0 CreateTime, 1 LogAppendTime
    key, value, id, tag: a column, (null_count, validity, ends, data, large)
        validity   None when null_count is 0, else one bit per row, least significant
                   bit first, 1 = present, padding bits 0
        ends       rows + 1 offsets into data from 0: int32, or int64 when ``large``
        data       the values back to back (a null takes no bytes)
        large      data holds more than ``large_threshold`` bytes (default 2 GiB - 1):
                   the column is large_binary / large_string
    headers   None unless the decoder was made with ``with_headers``, else
              (list_ends, large_list, name, value): list_ends are rows + 1 offsets into
              the header entries (int32, int64 when ``large_list``), name and value are
              columns of the entries (names never null)

``id`` and ``tag`` are the values of the last header called ``id_name`` / ``tag_name``
(a null value makes the column null), as UTF-8: bytes that are not UTF-8 are replaced
as ``bytes.decode("utf-8", "replace")`` does; header names likewise.

A malformed record raises :class:`~logtrove.records.CorruptRecordError` (``record <i>
of the batch is malformed: <what>``, the same text from both implementations) and leaves
the decoder as it was before that batch. Every read is bounds-checked against the
record's length, which is checked against the payload; varints keep 64 bits, as the
compiled loops read them (:mod:`logtrove.records.walk`). Records outside ``[start,
end)`` are framed (length, timestamp and offset deltas) but their fields are not read,
as the row-wise decoder did.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Protocol

from logtrove.native import compiled, implementation
from logtrove.records.batch import Buffer
from logtrove.records.errors import CorruptRecordError
from logtrove.records.varint import varint_below as _varint

LARGE_THRESHOLD = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_BITS = bytes.maketrans(b"\x00\x01", b"01")

Column = tuple[int, bytes | None, bytes, bytes, bool]
HeaderColumns = tuple[bytes, bool, Column, Column]
Taken = tuple[int, bytes, bytes, bytes, Column, Column, Column, Column, HeaderColumns | None]


class Decoder(Protocol):
    """The interface both implementations have."""

    @property
    def rows(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def add(
        self, payload: Buffer, base_offset: int, base_ts: int, append_ts: int | None, start: int, end: int
    ) -> int: ...

    def take(self) -> Taken: ...


def _malformed(record: int, what: str) -> CorruptRecordError:
    return CorruptRecordError(f"record {record} of the batch is malformed: {what}")


def _utf8(raw: bytes) -> bytes:
    """``raw`` as valid UTF-8 (invalid sequences replaced by U+FFFD)."""
    return raw if raw.isascii() else raw.decode("utf-8", "replace").encode("utf-8")


class _Column:
    """One nullable binary column: values back to back, end offsets, a flag per row."""

    __slots__ = ("data", "ends", "nulls", "valid")

    def __init__(self) -> None:
        self.data = bytearray()
        self.ends: array[int] = array("q")
        self.valid = bytearray()
        self.nulls = 0

    def append(self, value: bytes | None) -> None:
        if value is None:
            self.valid.append(0)
            self.nulls += 1
        else:
            self.data += value
            self.valid.append(1)
        self.ends.append(len(self.data))

    def mark(self) -> tuple[int, int, int]:
        return len(self.data), len(self.ends), self.nulls

    def rollback(self, mark: tuple[int, int, int]) -> None:
        data, rows, nulls = mark
        del self.data[data:]
        del self.ends[rows:]
        del self.valid[rows:]
        self.nulls = nulls

    def take(self, threshold: int) -> Column:
        large = len(self.data) > threshold
        validity = _bitmap(self.valid) if self.nulls else None
        return (self.nulls, validity, _ends(self.ends, large), bytes(self.data), large)


def _bitmap(flags: bytearray) -> bytes:
    """Arrow's validity bitmap of 0/1 flags: bit i of byte i // 8 is flag i."""
    if not flags:
        return b""
    bits = int(flags[::-1].translate(_BITS), 2)
    return bits.to_bytes((len(flags) + 7) // 8, "little")


def _ends(ends: array[int], large: bool) -> bytes:
    """Arrow offsets: 0, then each row's end; int64 when ``large``, else int32."""
    if large:
        return b"\0" * 8 + ends.tobytes()
    return array("i", [0, *ends]).tobytes()


class PyDecoder:
    """The pure-Python :class:`Decoder` (see the module doc)."""

    def __init__(
        self, id_name: bytes, tag_name: bytes, with_headers: bool, large_threshold: int = LARGE_THRESHOLD
    ) -> None:
        if not 0 <= large_threshold <= LARGE_THRESHOLD:
            raise ValueError("large_threshold must be in [0, 2**31 - 1]")
        self.id_name = bytes(id_name)
        self.tag_name = bytes(tag_name)
        self.with_headers = with_headers
        self.large_threshold = large_threshold
        self._reset()

    def _reset(self) -> None:
        self._offsets: array[int] = array("q")
        self._micros: array[int] = array("q")
        self._types: array[int] = array("i")
        self._key, self._value, self._id, self._tag = _Column(), _Column(), _Column(), _Column()
        self._list_ends: array[int] = array("q")
        self._hname, self._hvalue = _Column(), _Column()

    @property
    def rows(self) -> int:
        return len(self._offsets)

    @property
    def nbytes(self) -> int:
        """Bytes of keys, values and header entries held (for flushing by size)."""
        return len(self._key.data) + len(self._value.data) + len(self._hname.data) + len(self._hvalue.data)

    def _columns(self) -> tuple[_Column, ...]:
        return (self._key, self._value, self._id, self._tag, self._hname, self._hvalue)

    def add(
        self, payload: Buffer, base_offset: int, base_ts: int, append_ts: int | None, start: int, end: int
    ) -> int:
        """Decode one batch's records section; rows in ``[start, end)`` are appended.
        Returns the number of rows appended."""
        rows = len(self._offsets)
        marks = [c.mark() for c in self._columns()]
        list_rows = len(self._list_ends)
        try:
            self._add(bytes(payload), base_offset, base_ts, append_ts, start, end)
        except CorruptRecordError:
            for array_ in (self._offsets, self._micros, self._types):
                del array_[rows:]
            del self._list_ends[list_rows:]
            for column, mark in zip(self._columns(), marks, strict=True):
                column.rollback(mark)
            raise
        return len(self._offsets) - rows

    def _add(  # noqa: PLR0915 (one loop per record, as the C twin has)
        self, b: bytes, base_offset: int, base_ts: int, append_ts: int | None, start: int, end: int
    ) -> None:
        size = len(b)
        id_name, tag_name, with_headers = self.id_name, self.tag_name, self.with_headers
        ts_type = 0 if append_ts is None else 1
        p = index = 0
        while p < size:
            length, p = _varint(b, size, p)
            if length is None or length < 0 or length > size - p:
                raise _malformed(index, "its length runs past the records")
            rec_end = p + length
            if length == 0:
                raise _malformed(index, "it is empty")
            ts_delta, p = _varint(b, rec_end, p + 1)  # + 1: the attributes byte
            if ts_delta is None:
                raise _malformed(index, "truncated timestamp delta")
            offset_delta, p = _varint(b, rec_end, p)
            if offset_delta is None:
                raise _malformed(index, "truncated offset delta")
            offset = base_offset + offset_delta
            if not INT64_MIN <= offset <= INT64_MAX:
                raise _malformed(index, "its offset is out of range")
            if not start <= offset < end:
                p = rec_end
                index += 1
                continue
            klen, p = _varint(b, rec_end, p)
            if klen is None or klen > rec_end - p:
                raise _malformed(index, "truncated key")
            key = None
            if klen >= 0:
                key = b[p : p + klen]
                p += klen
            vlen, p = _varint(b, rec_end, p)
            if vlen is None or vlen > rec_end - p:
                raise _malformed(index, "truncated value")
            value = None
            if vlen >= 0:
                value = b[p : p + vlen]
                p += vlen
            count, p = _varint(b, rec_end, p)
            if count is None or count < 0:
                raise _malformed(index, "bad header count")
            msg_id = tag = None
            headers: list[tuple[bytes, bytes | None]] = []
            for _ in range(count):  # each header takes 2 bytes or more: a lying count ends quickly
                nlen, p = _varint(b, rec_end, p)
                if nlen is None or nlen < 0 or nlen > rec_end - p:
                    raise _malformed(index, "truncated header name")
                name = b[p : p + nlen]
                p += nlen
                hlen, p = _varint(b, rec_end, p)
                if hlen is None or hlen > rec_end - p:
                    raise _malformed(index, "truncated header value")
                hvalue = None
                if hlen >= 0:
                    hvalue = b[p : p + hlen]
                    p += hlen
                if name == id_name:
                    msg_id = hvalue
                if name == tag_name:
                    tag = hvalue
                if with_headers:
                    headers.append((name, hvalue))
            if p != rec_end:
                raise _malformed(index, "bytes left over after its fields")
            if append_ts is None:
                ts = base_ts + ts_delta
                if not INT64_MIN <= ts <= INT64_MAX:
                    raise _malformed(index, "its timestamp is out of range")
            else:
                ts = append_ts
            micros = ts * 1000
            if not INT64_MIN <= micros <= INT64_MAX:
                raise _malformed(index, "its timestamp is out of range")
            self._offsets.append(offset)
            self._micros.append(micros)
            self._types.append(ts_type)
            self._key.append(key)
            self._value.append(value)
            self._id.append(None if msg_id is None else _utf8(msg_id))
            self._tag.append(None if tag is None else _utf8(tag))
            if with_headers:
                for name, hvalue in headers:
                    self._hname.append(_utf8(name))
                    self._hvalue.append(hvalue)
                self._list_ends.append(len(self._hname.ends))
            index += 1

    def take(self) -> Taken:
        """The rows held, as Arrow buffers (see the module doc); the decoder is emptied."""
        t = self.large_threshold
        headers: HeaderColumns | None = None
        if self.with_headers:
            entries = len(self._hname.ends)
            large_list = entries > t
            headers = (
                _ends(self._list_ends, large_list),
                large_list,
                self._hname.take(t),
                self._hvalue.take(t),
            )
        out = (
            len(self._offsets),
            self._offsets.tobytes(),
            self._micros.tobytes(),
            self._types.tobytes(),
            self._key.take(t),
            self._value.take(t),
            self._id.take(t),
            self._tag.take(t),
            headers,
        )
        self._reset()
        return out


DecoderFactory = Callable[..., Decoder]


NATIVE = compiled("logtrove.records._columnar")
IMPLEMENTATION = implementation(NATIVE)


def new_decoder(
    id_name: bytes, tag_name: bytes, with_headers: bool, large_threshold: int = LARGE_THRESHOLD
) -> Decoder:
    """A :class:`Decoder`: compiled when available (see the module doc)."""
    factory: DecoderFactory = NATIVE.Decoder if NATIVE is not None else PyDecoder
    return factory(id_name, tag_name, with_headers, large_threshold)
