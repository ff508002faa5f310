"""Rows of the ``logtrove`` source: the columns of Spark's Kafka source plus ``id`` and
``tag``, emitted as Arrow record batches.

Full scans decode whole batches into Arrow buffers with the columnar decoder
(:func:`add_batch`, :func:`arrow_batch`, :mod:`logtrove.records.columnar`), and so do
remote mode's filtered reads (:mod:`logtrove.spark.filtering`); records found one by one
(direct mode's filter options, answered by the query engine) go through
:class:`ColumnBuffer`. Both give the same rows for the same records.

=================  ==========================  ======================================
column             Spark type                  Arrow type (must match exactly)
=================  ==========================  ======================================
key                binary                      binary
value              binary                      binary
topic              string                      string
partition          int                         int32
offset             bigint                      int64
timestamp          timestamp                   timestamp[us, tz=UTC]
timestampType      int                         int32 (0 CreateTime, 1 LogAppendTime)
headers            array<struct<key, value>>   list<struct<key: string, value: binary>>
id                 string                      string (the topic's message.id.header)
tag                string                      string (the topic's message.tag.header)
=================  ==========================  ======================================

``headers`` is present only with ``includeHeaders=true``. Every column is nullable.

A schema given by the user (``spark.read.format("logtrove").schema("partition int, value
binary")``) reaches the reader, and the rows then hold only those columns, in its order
(:func:`requested_columns`): a Python data source gets no column pruning from Spark, and
the copy of every column into Spark's rows was about half of a full scan's executor time.
``headers`` in such a schema is read whether or not ``includeHeaders`` is set.

pyspark and pyarrow are imported inside functions: this module is loaded by executors,
and ``import logtrove`` must work without the ``spark`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logtrove.records import BatchHeader, Record
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE, Buffer
from logtrove.records.columnar import Column, Decoder, Taken
from logtrove.records.record import batch_payload

BATCH_ROWS = 8192
BATCH_BYTES = 256 << 20  # flush before a column nears the 2 GiB of 32-bit Arrow offsets

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
EXTRA_COLUMNS = ("id", "tag")


def column_names(include_headers: bool) -> list[str]:
    return [*KAFKA_COLUMNS, *(("headers",) if include_headers else ()), *EXTRA_COLUMNS]


class ColumnSchemaError(ValueError):
    """A user-given schema asks for a column the source does not have, or with another type."""


def requested_columns(schema: Any) -> tuple[str, ...]:
    """The names of a schema's fields, checked against the source's columns: each must be
    one of them (case-sensitive), with its type (see the table above) and nullable; no name
    twice. Raises :class:`ColumnSchemaError` otherwise."""
    known = {f.name: f.dataType for f in spark_schema(True).fields}
    names = tuple(f.name for f in schema.fields)
    for f in schema.fields:
        if f.name not in known:
            raise ColumnSchemaError(
                f"the logtrove source has no column {f.name!r}; its columns are {', '.join(known)}"
            )
        if f.dataType != known[f.name]:
            raise ColumnSchemaError(
                f"column {f.name!r} of the logtrove source is {known[f.name].simpleString()}, "
                f"not {f.dataType.simpleString()}"
            )
        if not f.nullable:
            raise ColumnSchemaError(f"column {f.name!r} of the logtrove source is nullable: drop NOT NULL")
    if len(set(names)) != len(names):
        raise ColumnSchemaError(f"a column is asked for twice in {', '.join(names)}")
    return names


def spark_schema(include_headers: bool) -> Any:
    """The source's ``StructType``."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    fields += [StructField("id", StringType()), StructField("tag", StringType())]
    return StructType(fields)


def arrow_schema(include_headers: bool) -> Any:
    """The Arrow schema matching :func:`spark_schema` field for field."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(header)))
    fields += [pa.field("id", pa.string()), pa.field("tag", pa.string())]
    return pa.schema(fields)


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


@dataclass
class ColumnBuffer:
    """Rows of one topic partition, column by column, until they become an Arrow batch."""

    topic: str
    partition: int
    id_header: str
    tag_header: str
    include_headers: bool
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    micros: list[int] = field(default_factory=list)
    types: list[int] = field(default_factory=list)
    headers: list[list[dict[str, Any]]] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    tags: list[str | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, record: Record, log_append_time: bool) -> None:
        self.keys.append(record.key)
        self.values.append(record.value)
        self.offsets.append(record.offset)
        self.micros.append(record.timestamp * 1000)
        self.types.append(1 if log_append_time else 0)
        if record.headers:
            self.ids.append(_text(record.header(self.id_header)))
            self.tags.append(_text(record.header(self.tag_header)))
        else:
            self.ids.append(None)
            self.tags.append(None)
        if self.include_headers:
            self.headers.append([{"key": k, "value": v} for k, v in record.headers])

    def take_batch(self) -> Any:
        """The buffered rows as a ``pyarrow.RecordBatch``; the buffer is emptied."""
        import pyarrow as pa

        schema = arrow_schema(self.include_headers)
        n = len(self.offsets)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.micros, pa.timestamp("us", tz="UTC")),
            pa.array(self.types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, schema.field("headers").type))
        arrays += [pa.array(self.ids, pa.string()), pa.array(self.tags, pa.string())]
        for name in ("keys", "values", "offsets", "micros", "types", "headers", "ids", "tags"):
            getattr(self, name).clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def add_batch(
    decoder: Decoder,
    data: Buffer,
    header: BatchHeader,
    start: int,
    end: int,
    pos: int = 0,
    *,
    needles: tuple[bytes, ...] = (),
) -> int:
    """Decode the records of one batch (at ``pos`` in ``data``) with offsets in ``[start,
    end)`` into ``decoder`` (compiled when available, :mod:`logtrove.records.columnar`);
    returns the rows added. A batch whose decompressed records lack one of ``needles``
    is not decoded (0 rows): a filter's :func:`~logtrove.spark.filtering.needles` skip
    the batches that cannot hold a match.

    The records are decompressed within the default bound
    (:data:`~logtrove.records.compression.DEFAULT_MAX_DECOMPRESSED_BYTES`); in a
    LogAppendTime batch every record's timestamp is the batch's max timestamp, as
    :func:`logtrove.records.iter_records` reports it. Control batches are the caller's to
    skip.
    """
    append_time = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
    payload = batch_payload(data, header, pos)
    if needles:
        haystack = payload if isinstance(payload, bytes) else bytes(payload)
        if not all(needle in haystack for needle in needles):
            return 0
    return decoder.add(payload, header.base_offset, header.base_timestamp, append_time, start, end)


def _binary(rows: int, column: Column, text: bool) -> Any:
    import pyarrow as pa

    nulls, validity, ends, data, large = column
    if text:
        kind = pa.large_string() if large else pa.string()
    else:
        kind = pa.large_binary() if large else pa.binary()
    buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(ends), pa.py_buffer(data)]
    return pa.Array.from_buffers(kind, rows, buffers, null_count=nulls)


def arrow_batch(taken: Taken, topic: str, partition: int) -> Any:
    """The ``pyarrow.RecordBatch`` of a :meth:`~logtrove.records.columnar.Decoder.take`:
    its buffers wrapped without copying, ``topic`` and ``partition`` repeated.

    The schema is :func:`arrow_schema`, except that a column holding more than 2 GiB
    comes as ``large_binary`` / ``large_string`` (and ``headers`` as a ``large_list``
    past 2**31 - 1 entries); the readers flush by size (:data:`BATCH_BYTES`) so that
    this does not happen to what they hand Spark.
    """
    import pyarrow as pa

    rows, offsets, micros, types, key, value, msg_id, tag, headers = taken
    arrays = [
        _binary(rows, key, False),
        _binary(rows, value, False),
        pa.repeat(pa.scalar(topic, pa.string()), rows),
        pa.repeat(pa.scalar(partition, pa.int32()), rows),
        pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(offsets)], null_count=0),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), rows, [None, pa.py_buffer(micros)], null_count=0),
        pa.Array.from_buffers(pa.int32(), rows, [None, pa.py_buffer(types)], null_count=0),
    ]
    if headers is not None:
        list_ends, large_list, names, values = headers
        entries = len(names[2]) // (8 if names[4] else 4) - 1
        entry = pa.StructArray.from_arrays(
            [_binary(entries, names, True), _binary(entries, values, False)], names=["key", "value"]
        )
        kind = pa.large_list(entry.type) if large_list else pa.list_(entry.type)
        arrays.append(
            pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(list_ends)], null_count=0, children=[entry])
        )
    arrays += [_binary(rows, msg_id, True), _binary(rows, tag, True)]
    schema = arrow_schema(headers is not None)
    if all(a.type == f.type for a, f in zip(arrays, schema, strict=True)):
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
    return pa.RecordBatch.from_arrays(arrays, names=schema.names)
