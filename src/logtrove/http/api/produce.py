"""REST produce (Kafka REST proxy style): JSON records in, their offsets out.

Records go to their ``partition`` if given, else where Kafka's default partitioner puts
their key (murmur2), else round robin. The whole request is checked before anything is
written; each partition's records are then appended as one batch, so a request is
all-or-nothing per partition.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import threading
from typing import Annotated

from fastapi import APIRouter, Depends

from logtrove.http.api.topics import TopicPath
from logtrove.http.context import HttpContext, get_context
from logtrove.http.models import ProducedOffset, ProduceRecord, ProduceRequest, ProduceResult
from logtrove.http.problems import Problem, bad_request, problem_responses
from logtrove.records import Compression, NewRecord, build_batch
from logtrove.records.partitioner import partition_for_key

router = APIRouter(prefix="/api/v1/topics/{topic}", tags=["produce"])

_round_robin = itertools.count()
_rr_lock = threading.Lock()


def _utf8(text: str, where: str) -> bytes:
    """``text`` as UTF-8; a 422 naming ``where`` if it holds a lone surrogate (JSON allows
    ``"\\ud800"``, UTF-8 cannot encode it)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise bad_request(
            f"{where} is not valid Unicode text: it holds a lone surrogate such as \\ud800 "
            "(send binary data base64-encoded in key_b64 / value_b64)"
        ) from None


def _bytes(text: str | None, b64: str | None, field: str, index: int) -> bytes | None:
    if text is not None and b64 is not None:
        raise bad_request(f"records[{index}]: give {field} or {field}_b64, not both")
    if b64 is None:
        return None if text is None else _utf8(text, f"records[{index}].{field}")
    try:
        return base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"records[{index}].{field}_b64 is not valid base64") from None


def to_new_record(item: ProduceRecord, index: int) -> NewRecord:
    """A :class:`NewRecord` from one input record; non-string values become compact JSON."""
    value = item.value
    if value is not None and not isinstance(value, str):
        value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    headers = item.headers.items() if isinstance(item.headers, dict) else item.headers
    return NewRecord(
        value=_bytes(value, item.value_b64, "value", index),
        key=_bytes(item.key, item.key_b64, "key", index),
        headers=tuple(
            (
                _checked_name(name, index),
                None if v is None else _utf8(v, f"records[{index}].headers[{name!r}]"),
            )
            for name, v in headers
        ),
        timestamp=item.timestamp,
    )


def _checked_name(name: str, index: int) -> str:
    _utf8(name, f"records[{index}]: header name {name!r}")
    return name


def _partition_of(item: ProduceRecord, record: NewRecord, partitions: int, index: int) -> int:
    if item.partition is not None:
        if item.partition >= partitions:
            raise Problem(
                404,
                "unknown-partition",
                "Unknown partition",
                f"records[{index}]: partition {item.partition} does not exist (topic has {partitions})",
            )
        return item.partition
    if record.key is not None:
        return partition_for_key(record.key, partitions)
    with _rr_lock:
        return next(_round_robin) % partitions


@router.post(
    "/messages",
    status_code=201,
    summary="Produce records",
    responses=problem_responses(403, 404, 413, 422, 503),
)
def produce(
    topic: TopicPath, body: ProduceRequest, ctx: Annotated[HttpContext, Depends(get_context)]
) -> ProduceResult:
    if not ctx.allow_writes:
        raise Problem(
            403, "read-only", "Read-only", "this server is read-only (start `logtrove serve` to write)"
        )
    partitions = ctx.storage.topic(topic).partitions
    by_partition: dict[int, list[tuple[int, NewRecord]]] = {}
    for index, item in enumerate(body.records):
        record = to_new_record(item, index)
        by_partition.setdefault(_partition_of(item, record, partitions, index), []).append((index, record))
    codec = Compression.parse(body.compression)
    offsets: list[ProducedOffset | None] = [None] * len(body.records)
    for partition, items in sorted(by_partition.items()):
        batch = build_batch([r for _, r in items], compression=codec, clock=ctx.clock)
        result = ctx.append(topic, partition, batch)
        for position, (index, _) in enumerate(items):
            offsets[index] = ProducedOffset(partition=partition, offset=result.base_offset + position)
    return ProduceResult(topic=topic, offsets=[o for o in offsets if o is not None])
