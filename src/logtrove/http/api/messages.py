"""Finding messages: by offset (with neighbours), browsing a partition, by timestamp.

Every answer carries ``cli``, the ``logtrove query`` command that asks the same question.
"""

from __future__ import annotations

from itertools import islice
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from logtrove.http.api.topics import PartitionPath, StorageDep, TopicPath
from logtrove.http.context import HttpContext, get_context
from logtrove.http.models import Message, MessagePage
from logtrove.http.problems import Problem, problem_responses
from logtrove.http.render import cli_command, parse_time, render_message
from logtrove.storage import OffsetOutOfRangeError, PartitionLog, Storage

router = APIRouter(prefix="/api/v1/topics/{topic}", tags=["messages"])

OffsetPath = Annotated[int, Path(ge=0, le=2**62, description="Offset.")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Most messages to return.")]
CtxDep = Annotated[HttpContext, Depends(get_context)]


def _messages(storage: Storage, log: PartitionLog, start: int, end: int | None, limit: int) -> list[Message]:
    header = log.config.message_id_header
    return [
        render_message(log.tp.topic, log.tp.partition, r, id_header=header)
        for r in islice(log.records(start, end), limit)
    ]


def _check_in_log(log: PartitionLog, offset: int) -> None:
    start, end = log.log_start_offset, log.log_end_offset
    if not start <= offset < end:
        where = "before the log start" if offset < start else "at or past the log end"
        raise OffsetOutOfRangeError(
            f"offset {offset} is {where}: partition {log.tp.partition} of {log.tp.topic!r} "
            f"holds offsets {start}-{end - 1}"
            if end > start
            else f"offset {offset} is {where}: partition {log.tp.partition} of {log.tp.topic!r} is empty",
            log_start_offset=start,
            log_end_offset=end,
        )


@router.get(
    "/partitions/{partition}/messages",
    summary="Browse a partition forward from an offset",
    responses=problem_responses(404, 422),
)
def browse(
    topic: TopicPath,
    partition: PartitionPath,
    storage: StorageDep,
    ctx: CtxDep,
    offset: Annotated[
        int | None, Query(ge=0, le=2**62, description="First offset; default log start.")
    ] = None,
    limit: Limit = 50,
) -> MessagePage:
    log = storage.log(topic, partition)
    start = log.log_start_offset if offset is None else offset
    messages = _messages(storage, log, start, None, limit)
    end = log.log_end_offset
    more = bool(messages) and messages[-1].offset + 1 < end and len(messages) == limit
    return MessagePage(
        messages=messages,
        next_cursor=str(messages[-1].offset + 1) if more else None,
        reason="limit reached" if more else "range exhausted",
        cli=cli_command(
            str(ctx.storage.path),
            topic,
            [("--partition", partition), ("--offset", start), ("--limit", limit)],
        ),
    )


@router.get(
    "/partitions/{partition}/offsets/{offset}",
    summary="The message at an offset (or the next surviving one on a compacted topic)",
    responses=problem_responses(404, 422),
)
def by_offset(topic: TopicPath, partition: PartitionPath, offset: OffsetPath, storage: StorageDep) -> Message:
    log = storage.log(topic, partition)
    _check_in_log(log, offset)
    found = _messages(storage, log, offset, None, 1)
    if not found:
        raise Problem(
            404,
            "no-message",
            "No message",
            f"no message at or after offset {offset} in partition {partition} of {topic!r}",
        )
    return found[0]


@router.get(
    "/partitions/{partition}/offsets/{offset}/neighbours",
    summary="Messages around an offset",
    responses=problem_responses(404, 422),
)
def neighbours(
    topic: TopicPath,
    partition: PartitionPath,
    offset: OffsetPath,
    storage: StorageDep,
    ctx: CtxDep,
    before: Annotated[int, Query(ge=0, le=500)] = 5,
    after: Annotated[int, Query(ge=0, le=500)] = 5,
) -> MessagePage:
    log = storage.log(topic, partition)
    _check_in_log(log, offset)
    first = max(offset - before, log.log_start_offset)
    earlier = _messages(storage, log, first, offset, before)
    later = _messages(storage, log, offset, None, after + 1)
    return MessagePage(
        messages=earlier + later,
        reason="range exhausted",
        cli=cli_command(
            str(ctx.storage.path),
            topic,
            [("--partition", partition), ("--offset", first), ("--limit", before + after + 1)],
        ),
    )


@router.get(
    "/messages/at",
    summary="In each partition, the first message with timestamp ≥ time",
    responses=problem_responses(404, 422),
)
def at_time(
    topic: TopicPath,
    storage: StorageDep,
    ctx: CtxDep,
    time: Annotated[str, Query(max_length=64, description="Epoch ms or ISO-8601.")],
    partition: Annotated[int | None, Query(ge=0, le=9_999, description="Only this partition.")] = None,
) -> MessagePage:
    ts = parse_time(time, "time")
    info = storage.topic(topic)
    parts = range(info.partitions) if partition is None else [partition]
    messages = []
    for p in parts:
        log = storage.log(topic, p)
        found = log.offset_for_timestamp(ts)
        if found is not None:
            messages += _messages(storage, log, found.offset, None, 1)
    return MessagePage(
        messages=messages,
        reason="range exhausted",
        cli=cli_command(str(ctx.storage.path), topic, [("--partition", partition), ("--time", time)]),
    )
