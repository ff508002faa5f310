"""Kafka wire framing: the size prefix, request and response headers, and the small
primitives every hand-written encoder needs.

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
"""

from __future__ import annotations

import datetime as dt
import io
import struct
from typing import Any

from kio.serial import entity_writer

from logtrove.wire.api_keys import ApiKey

SIZE = struct.Struct(">i")
REQUEST_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
RESPONSE_HEADER_V0 = struct.Struct(">i")  # correlation_id
RESPONSE_HEADER_V1 = struct.Struct(">iB")  # correlation_id, empty tagged fields
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
# bound once: looking a member up on the enum class costs ~50 ns, per response here
_API_VERSIONS = ApiKey.API_VERSIONS


def response_header(correlation_id: int, flexible: bool, api_key: int) -> bytes:
    """The response header bytes (without the size prefix)."""
    if flexible and api_key != _API_VERSIONS:
        return RESPONSE_HEADER_V1.pack(correlation_id, 0)
    return RESPONSE_HEADER_V0.pack(correlation_id)


def response_header_size(flexible: bool, api_key: int) -> int:
    """How many bytes the response header of ``api_key`` takes (see :func:`response_header`)."""
    if flexible and api_key != _API_VERSIONS:
        return RESPONSE_HEADER_V1.size
    return RESPONSE_HEADER_V0.size


def uvarint(value: int) -> bytes:
    """An unsigned varint (the lengths of flexible versions: N + 1, 0 for null)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode(entity: Any) -> bytes:
    """Encode a kio entity (a request or response body, or a header)."""
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def ms(value: dt.timedelta | int) -> int:
    """Milliseconds of a kio duration field (decoded as a timedelta)."""
    if isinstance(value, dt.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)
