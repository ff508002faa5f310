"""Rows of the ``logtrove`` source: the columns of Spark's Kafka source plus ``id`` and
``tag``, collected column by column and emitted as Arrow record batches.

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
pyspark and pyarrow are imported inside functions: this module is loaded by executors,
and ``import logtrove`` must work without the ``spark`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logtrove.records import Record

BATCH_ROWS = 8192

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
EXTRA_COLUMNS = ("id", "tag")


def column_names(include_headers: bool) -> list[str]:
    return [*KAFKA_COLUMNS, *(("headers",) if include_headers else ()), *EXTRA_COLUMNS]


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
