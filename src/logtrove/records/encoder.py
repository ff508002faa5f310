"""The columnar encoder: Arrow columns straight into Kafka v2 record batches.

The reverse of :mod:`logtrove.records.columnar`, for writers that hold rows as Arrow
buffers (the Spark writer): two functions take the buffers of the columns and make no
Python object per row.

* :func:`partition_order` picks each row's partition — the ``partition`` column where
  it is not null, else Kafka's default partitioner (murmur2 of the key, as
  :func:`~logtrove.records.partitioner.partition_for_key`), else round robin — and
  returns the row indices grouped by partition (a stable counting sort: rows keep their
  order inside a partition).
* :func:`encode_records` encodes the rows ``order[lo:next]`` as the records section of one
  batch, exactly as :func:`~logtrove.records.build_batch` encodes the same rows as
  :class:`~logtrove.records.NewRecord` objects; ``next`` is where a size estimate
  (key + value + 32 bytes a row) first reaches ``budget``, so that batches stay near a
  target size. :func:`~logtrove.records.builder.frame_records` then adds the batch
  header and compresses.

Two implementations give the same results for the same buffers:

* ``logtrove.records._encoder``, compiled from ``_encoder.c`` when the package is
  installed with a C compiler;
* :func:`py_partition_order` and :func:`py_encode_records`, pure Python, which define the
  behaviour and the formats.

:data:`IMPLEMENTATION` says which one :func:`partition_order` and :func:`encode_records`
run, chosen as :mod:`logtrove.native` says (``LOGTROVE_PURE_PYTHON=1`` forces the twin). ``tests/spark/test_encoder.py`` checks
both give the same bytes as ``build_batch`` for random rows.

Argument formats (Arrow's layout; integers little-endian; ``offset`` is the Arrow
array's slice offset, applied to validity bits, offsets and values)::

    column     (validity, ends, data, large, offset) or None (absent: every row null)
        validity   bitmap, bit i of byte i // 8 = row i present, or None (no nulls)
        ends       rows + 1 int32 offsets into data (int64 when ``large``)
    ints       (validity, data, offset) or None: int32 (partition) or int64 (timestamp µs)
    headers    (validity, ends, large, offset, names, values) or None: the list offsets
               of each row into the header entries; names and values are columns over
               the entries (a name may not be null)
    order      int64 row indices (bytes)

A timestamp is given in microseconds (Spark's ``timestamp``) and written in milliseconds,
rounded down; a null timestamp (or no column) is ``now_ms``. A buffer shorter than its
rows need, an offset outside its data, a row index out of range or a null header name
raises ``ValueError``; so does an explicit partition outside ``[0, total)``
(``has partitions 0-<total - 1>, not <p>``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from logtrove.native import compiled, implementation
from logtrove.records.partitioner import partition_for_key
from logtrove.records.varint import encode_varint

ColumnSpec = tuple[Any, Any, Any, bool, int]
IntsSpec = tuple[Any, Any, int]
HeadersSpec = tuple[Any, Any, bool, int, ColumnSpec, ColumnSpec]
Encoded = tuple[bytes, int, int, int]


class _Col:
    """Row access to a column spec (the twin's slow, simple reading of the buffers)."""

    def __init__(self, spec: ColumnSpec | None, rows: int) -> None:
        self.present = spec is not None
        if spec is None:
            return
        validity, ends, data, large, offset = spec
        self.validity = None if validity is None else memoryview(validity).cast("B")
        width = 8 if large else 4
        raw = memoryview(ends).cast("B")
        if len(raw) < (offset + rows + 1) * width:
            raise ValueError(
                f"the offsets buffer holds {len(raw)} bytes, needs {(offset + rows + 1) * width}"
            )
        if self.validity is not None and len(self.validity) < (offset + rows + 7) // 8:
            raise ValueError("the validity buffer is too short")
        self.ends = raw[: (len(raw) // width) * width].cast("q" if large else "i")
        self.data = bytes(data)
        self.offset = offset

    def get(self, row: int) -> bytes | None:
        if not self.present:
            return None
        i = self.offset + row
        if self.validity is not None and not (self.validity[i >> 3] >> (i & 7)) & 1:
            return None
        a, b = self.ends[i], self.ends[i + 1]
        if a < 0 or b < a or b > len(self.data):
            raise ValueError(f"row {row}: its offsets are outside the data buffer")
        return self.data[a:b]


class _Ints:
    def __init__(self, spec: IntsSpec | None, rows: int, fmt: Literal["i", "q"]) -> None:
        self.present = spec is not None
        if spec is None:
            return
        validity, data, offset = spec
        self.validity = None if validity is None else memoryview(validity).cast("B")
        raw = memoryview(data).cast("B")
        width = 4 if fmt == "i" else 8
        if len(raw) < (offset + rows) * width:
            raise ValueError("the values buffer is too short")
        self.values = raw[: (len(raw) // width) * width].cast(fmt)
        self.offset = offset

    def get(self, row: int) -> int | None:
        if not self.present:
            return None
        i = self.offset + row
        if self.validity is not None and not (self.validity[i >> 3] >> (i & 7)) & 1:
            return None
        return int(self.values[i])


def py_partition_order(
    key: ColumnSpec | None, explicit: IntsSpec | None, rows: int, total: int, rr_start: int
) -> tuple[bytes, bytes, int]:
    """``(order, starts, rr_next)``: row indices grouped by partition (int64 bytes), where
    each partition's group starts (``total + 1`` int64, the last = rows), and the
    round-robin counter after the keyless rows."""
    if rows < 0 or not 0 < total < 2**31 or rr_start < 0:
        raise ValueError("rows >= 0, 0 < total < 2**31 and rr_start >= 0")
    keys, parts = _Col(key, rows), _Ints(explicit, rows, "i")
    groups: list[list[int]] = [[] for _ in range(total)]
    rr = rr_start
    for i in range(rows):
        p = parts.get(i)
        if p is None:
            k = keys.get(i)
            if k is not None:
                p = partition_for_key(k, total)
            else:
                p, rr = rr % total, rr + 1
        if not 0 <= p < total:
            raise ValueError(f"has partitions 0-{total - 1}, not {p}")
        groups[p].append(i)
    starts = [0]
    for g in groups:
        starts.append(starts[-1] + len(g))
    order = [i for g in groups for i in g]
    return _int64s(order), _int64s(starts), rr


def _int64s(values: list[int]) -> bytes:
    return b"".join(v.to_bytes(8, "little", signed=True) for v in values)


def _bytes_field(data: bytes | None) -> bytes:
    return b"\x01" if data is None else encode_varint(len(data)) + data


def py_encode_records(
    key: ColumnSpec | None,
    value: ColumnSpec | None,
    ts: IntsSpec | None,
    headers: HeadersSpec | None,
    rows: int,
    order: bytes,
    lo: int,
    hi: int,
    budget: int,
    now_ms: int,
) -> Encoded:
    """``(payload, next, base_ts, max_ts)``: the records section of rows
    ``order[lo:next]`` (offset deltas from 0, timestamp deltas from the first row's)."""
    if rows < 0:
        raise ValueError("rows must be >= 0")
    keys, values, stamps = _Col(key, rows), _Col(value, rows), _Ints(ts, rows, "q")
    lists: _Col | None = None
    names = hvalues = _Col(None, 0)
    entries = 0
    if headers is not None:
        validity, ends, large, offset, name_spec, value_spec = headers
        lists = _Col((validity, ends, b"", large, offset), rows)
        entries = lists.ends[offset + rows]
        if entries < 0:
            raise ValueError("bad headers offsets")
        names, hvalues = _Col(name_spec, entries), _Col(value_spec, entries)
    indices = memoryview(order).cast("B")
    indices = indices[: len(indices) // 8 * 8].cast("q")
    if lo < 0 or hi > len(indices) or lo >= hi:
        raise ValueError("need 0 <= lo < hi <= len(order)")
    parts: list[bytes] = []
    base_ts = max_ts = estimate = 0
    for i in range(lo, hi):
        row = indices[i]
        if not 0 <= row < rows:
            raise ValueError(f"row index {row} is not in 0-{rows - 1}")
        micros = stamps.get(row)
        stamp = now_ms if micros is None else micros // 1000
        if i == lo:
            base_ts = max_ts = stamp
        max_ts = max(max_ts, stamp)
        k, v = keys.get(row), values.get(row)
        body = [
            b"\x00",
            encode_varint(stamp - base_ts),
            encode_varint(i - lo),
            _bytes_field(k),
            _bytes_field(v),
        ]
        pairs = _headers_of(lists, entries, names, hvalues, row)
        body.append(encode_varint(len(pairs)))
        for name, hvalue in pairs:
            if name is None:
                raise ValueError(f"row {row} has a header without a name")
            body.append(_bytes_field(name) + _bytes_field(hvalue))
        record = b"".join(body)
        parts.append(encode_varint(len(record)) + record)
        estimate += len(k or b"") + len(v or b"") + 32
        if estimate >= budget:
            return b"".join(parts), i + 1, base_ts, max_ts
    return b"".join(parts), hi, base_ts, max_ts


def _headers_of(
    lists: _Col | None, entries: int, names: _Col, hvalues: _Col, row: int
) -> list[tuple[bytes | None, bytes | None]]:
    if lists is None:
        return []
    i = lists.offset + row
    if lists.validity is not None and not (lists.validity[i >> 3] >> (i & 7)) & 1:
        return []
    a, b = lists.ends[i], lists.ends[i + 1]
    if a < 0 or b < a or b > entries:
        raise ValueError(f"row {row}: its headers are outside the entries")
    return [(names.get(h), hvalues.get(h)) for h in range(a, b)]


PartitionOrder = Callable[[ColumnSpec | None, IntsSpec | None, int, int, int], tuple[bytes, bytes, int]]
EncodeRecords = Callable[..., Encoded]


NATIVE = compiled("logtrove.records._encoder")
IMPLEMENTATION = implementation(NATIVE)
partition_order: PartitionOrder = NATIVE.partition_order if NATIVE is not None else py_partition_order
encode_records: EncodeRecords = NATIVE.encode_records if NATIVE is not None else py_encode_records
