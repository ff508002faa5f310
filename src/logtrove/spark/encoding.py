"""The writer's encoding side: Arrow record batches of rows into Kafka record batches.

The columns are those of :mod:`logtrove.spark.writer` (Spark's Kafka sink): ``value``
(string or binary), and optionally ``key`` (string or binary), ``topic`` (string),
``partition`` (int), ``timestamp`` (timestamp) and ``headers``
(``array<struct<key: string, value: binary>>``), as the source produces them
(:mod:`logtrove.spark.columns`). Their Arrow buffers go to the columnar encoder
(:mod:`logtrove.records.encoder`) as they are: no Python object is made per row, only
per Arrow batch, topic, partition and record batch.

A :class:`TopicRows` is the rows of one topic with its columns as the encoder takes them;
:func:`topic_rows` splits an Arrow batch by topic (one filter per distinct topic, none
when there is a single one). pyarrow is imported inside functions, as in
:mod:`logtrove.spark.columns`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from logtrove.records.encoder import ColumnSpec, HeadersSpec, IntsSpec


class ColumnTypeError(ValueError):
    """A column of a type the writer does not take."""


@dataclass(frozen=True)
class TopicRows:
    """The rows of one topic: the encoder's column specs over ``rows`` rows."""

    topic: str
    rows: int
    key: ColumnSpec | None
    value: ColumnSpec | None
    partition: IntsSpec | None
    timestamp: IntsSpec | None
    headers: HeadersSpec | None
    batch: Any  # the Arrow batch the buffers belong to: keeps them alive


def _binary(arr: Any, name: str) -> ColumnSpec:
    import pyarrow as pa

    t = arr.type
    if pa.types.is_string(t):
        arr = arr.view(pa.binary())
    elif pa.types.is_large_string(t):
        arr = arr.view(pa.large_binary())
    elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        raise ColumnTypeError(f"the {name} column must be string or binary, not {t}")
    validity, ends, data = arr.buffers()
    return (
        validity if arr.null_count else None,
        ends,
        b"" if data is None else data,
        pa.types.is_large_binary(arr.type),
        arr.offset,
    )


def _ints(arr: Any, target: Any) -> IntsSpec:
    arr = arr.cast(target)
    validity, data = arr.buffers()
    return (validity if arr.null_count else None, data, arr.offset)


def _timestamps(arr: Any) -> IntsSpec:
    """Microseconds since the epoch (Spark's unit) as int64."""
    import pyarrow as pa

    if not pa.types.is_timestamp(arr.type):
        raise ColumnTypeError(f"the timestamp column must be a timestamp, not {arr.type}")
    if arr.type.unit != "us":
        arr = arr.cast(pa.timestamp("us", tz=arr.type.tz))
    validity, data = arr.buffers()
    return (validity if arr.null_count else None, data, arr.offset)


def _headers(arr: Any) -> HeadersSpec:
    import pyarrow as pa

    t = arr.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(t.value_type):
        raise ColumnTypeError(f"the headers column must be array<struct<key, value>>, not {t}")
    entries = arr.values
    fields = {f.name: i for i, f in enumerate(entries.type)}
    if "key" not in fields or "value" not in fields:
        raise ColumnTypeError("the headers' structs need key and value fields")
    flat = entries.flatten()
    validity, ends = arr.buffers()[:2]
    return (
        validity if arr.null_count else None,
        ends,
        pa.types.is_large_list(t),
        arr.offset,
        _binary(flat[fields["key"]], "headers.key"),
        _binary(flat[fields["value"]], "headers.value"),
    )


def topic_rows(batch: Any, default_topic: str | None) -> Iterator[TopicRows]:
    """The rows of ``batch`` by topic (``ColumnTypeError`` for a column of another type;
    ``LookupError`` for a row without a topic)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    if "topic" not in names:
        if not default_topic:
            raise LookupError("row without a topic")
        yield _topic_rows(default_topic, batch)
        return
    topics = batch.column(names.index("topic"))
    topics = pc.if_else(pc.equal(topics, ""), pa.scalar(None, topics.type), topics)  # "": no topic
    if default_topic:
        topics = pc.fill_null(topics, pa.scalar(default_topic, topics.type))
    if topics.null_count:
        raise LookupError("row without a topic")
    distinct = pc.unique(topics).to_pylist()
    if len(distinct) == 1:
        yield _topic_rows(distinct[0], batch)
        return
    for topic in distinct:
        yield _topic_rows(topic, batch.filter(pc.equal(topics, topic)))


def _topic_rows(topic: str, batch: Any) -> TopicRows:
    import pyarrow as pa

    names = batch.schema.names

    def col(name: str) -> Any:
        return batch.column(names.index(name)) if name in names else None

    key, value, partition, stamps, headers = (
        col(n) for n in ("key", "value", "partition", "timestamp", "headers")
    )
    return TopicRows(
        topic,
        batch.num_rows,
        None if key is None else _binary(key, "key"),
        None if value is None else _binary(value, "value"),
        None if partition is None else _ints(partition, pa.int32()),
        None if stamps is None else _timestamps(stamps),
        None if headers is None else _headers(headers),
        batch,
    )
