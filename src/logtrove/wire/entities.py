"""Plain Python values to kio entities: one dict per message for every version.

Handlers describe responses, and clients requests, as nested dicts that are the same
for every version; :func:`build` turns them into the kio dataclass of the version asked
for, dropping the keys that version does not have and filling the fields left out with
Kafka's defaults (0, empty, null, ``NONE`` error). That keeps one handler per API
instead of one per version, and one request builder per API in the clients.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    is_optional,
)

ZERO_UUID = uuid.UUID(int=0)


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
