"""Kafka wire framing and the glue between plain Python values and kio entities.

A Kafka request on the wire::

    ┌──────────────┬───────────────────────────────────────┬──────────────────┐
    │ size i32     │ header: api_key i16, api_version i16, │ body (per API    │
    │ (of the rest)│ correlation_id i32, client_id, [tags] │ and version)     │
    └──────────────┴───────────────────────────────────────┴──────────────────┘

and a response::

    ┌──────────────┬────────────────────────────────┬──────────────────────────┐
    │ size i32     │ correlation_id i32 [, tags u8] │ body                     │
    └──────────────┴────────────────────────────────┴──────────────────────────┘

Response header v1 (with the tag byte) goes with flexible versions, except for
ApiVersions, whose response header is always v0 so that a client can read it whatever
version it asked for.

Handlers describe responses as nested dicts that are the same for every version;
:func:`build` turns them into the kio dataclass of the version asked for, dropping the
keys that version does not have and filling the fields the handler left out with
Kafka's defaults (0, empty, null, ``NONE`` error). That keeps one handler per API
instead of one per version.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import struct
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    is_optional,
)

from logtrove.records import (
    CorruptRecordError,
    InvalidRecordCountError,
    RecordsError,
    UnsupportedCompressionError,
)
from logtrove.storage import (
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    PartitionLimitError,
    ReadOnlyError,
    RecordTooLargeError,
    StorageError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)

SIZE = struct.Struct(">i")
REQUEST_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
RESPONSE_HEADER_V0 = struct.Struct(">i")  # correlation_id
RESPONSE_HEADER_V1 = struct.Struct(">iB")  # correlation_id, empty tagged fields

API_VERSIONS_KEY = 18
ZERO_UUID = uuid.UUID(int=0)


def response_header(correlation_id: int, flexible: bool, api_key: int) -> bytes:
    """The response header bytes (without the size prefix)."""
    if flexible and api_key != API_VERSIONS_KEY:
        return RESPONSE_HEADER_V1.pack(correlation_id, 0)
    return RESPONSE_HEADER_V0.pack(correlation_id)


def encode(entity: Any) -> bytes:
    """Encode a kio entity (a response body)."""
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def ms(value: dt.timedelta | int) -> int:
    """Milliseconds of a kio duration field (decoded as a timedelta)."""
    if isinstance(value, dt.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


# -- dict -> kio entity --------------------------------------------------------------
_Converter = Callable[[Any], Any]


def _datetime(value: Any) -> Any:
    if value is None or isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromtimestamp(int(value) / 1000, dt.UTC)


def _timedelta(value: Any) -> Any:
    return value if isinstance(value, dt.timedelta) else dt.timedelta(milliseconds=int(value))


def _error(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


_SCALARS: dict[str, tuple[_Converter, Any]] = {
    "error_code": (_error, ErrorCode.none),
    "timedelta_i32": (_timedelta, dt.timedelta(0)),
    "timedelta_i64": (_timedelta, dt.timedelta(0)),
    "datetime_i64": (_datetime, None),
    "bool": (bool, False),
    "string": (lambda v: v, ""),
    "bytes": (lambda v: v, b""),
    "records": (lambda v: v, None),
    "uuid": (lambda v: v, ZERO_UUID),
    "float64": (float, 0.0),
}


@dataclasses.dataclass(frozen=True)
class _FieldPlan:
    name: str
    convert: _Converter
    default: Any  # a value, or a zero-argument factory when ``factory`` is set
    factory: bool
    required: bool


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plans = []
    for f in dataclasses.fields(cls):
        optional = is_optional(f)
        kind = classify_field(f)
        has_default = f.default is not dataclasses.MISSING
        convert: _Converter
        if isinstance(kind, EntityTupleField):
            sub = kind.type_
            convert = _tuple_of(sub)
            default: Any = None if optional else ()
        elif isinstance(kind, EntityField):
            sub = kind.type_
            convert = _entity_of(sub)
            default = None if optional else sub
            plans.append(_FieldPlan(f.name, convert, default, not optional, not has_default))
            continue
        elif kind.is_array:
            convert = tuple
            default = None if optional else ()
        else:
            kafka_type = f.metadata.get("kafka_type", "")
            convert, default = _SCALARS.get(kafka_type, (int, 0))
            if optional:
                default = None
        plans.append(_FieldPlan(f.name, convert, default, False, not has_default))
    return tuple(plans)


def _entity_of(sub: type) -> _Converter:
    def convert(value: Any) -> Any:
        if value is None or dataclasses.is_dataclass(value):
            return value
        return build(sub, value)

    return convert


def _tuple_of(sub: type) -> _Converter:
    def convert(value: Any) -> Any:
        if value is None:
            return None
        return tuple(v if dataclasses.is_dataclass(v) else build(sub, v) for v in value)

    return convert


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """An instance of the kio dataclass ``cls`` from a version-independent dict."""
    kwargs: dict[str, Any] = {}
    for plan in _plan(cls):
        if plan.name in data:
            value = data[plan.name]
            kwargs[plan.name] = None if value is None else plan.convert(value)
        elif plan.required:
            kwargs[plan.name] = build(plan.default, {}) if plan.factory else plan.default
    return cls(**kwargs)


# -- exceptions -> Kafka error codes ---------------------------------------------------
_ERRORS: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (UnknownTopicError, ErrorCode.unknown_topic_or_partition),
    (UnknownPartitionError, ErrorCode.unknown_topic_or_partition),
    (OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (RecordTooLargeError, ErrorCode.message_too_large),
    (InvalidRecordError, ErrorCode.invalid_record),
    (TopicExistsError, ErrorCode.topic_already_exists),
    (InvalidTopicError, ErrorCode.invalid_topic_exception),
    (InvalidConfigError, ErrorCode.invalid_config),
    (ReadOnlyError, ErrorCode.policy_violation),
    # as Kafka's LogValidator: a record that does not parse, or a count that lies, is an
    # InvalidRecordException (not retriable); a bad CRC or frame stays CORRUPT_MESSAGE
    (CorruptRecordError, ErrorCode.invalid_record),
    (InvalidRecordCountError, ErrorCode.invalid_record),
    (UnsupportedCompressionError, ErrorCode.unsupported_compression_type),
    (PartitionLimitError, ErrorCode.policy_violation),
    (RecordsError, ErrorCode.corrupt_message),
    (StorageError, ErrorCode.kafka_storage_error),
)


def error_code(exc: BaseException) -> ErrorCode:
    """The Kafka error code for a storage or records exception."""
    for cls, code in _ERRORS:
        if isinstance(exc, cls):
            return code
    return ErrorCode.unknown_server_error
