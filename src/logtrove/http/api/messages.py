"""Messages by position: at an offset (or the next surviving one), around an offset,
browsing a partition forward, and by broker position ID.

Every page carries ``cli``, the ``logtrove`` command closest to the same question.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request

from logtrove.acl import Operation, ResourceType
from logtrove.http.api.topics import PartitionPath, StorageDep, TopicPath
from logtrove.http.context import HttpContext, get_context
from logtrove.http.models import Message, MessagePage
from logtrove.http.problems import problem_responses
from logtrove.http.render import cli_command, render_message
from logtrove.http.security import require
from logtrove.query import Message as QueryMessage
from logtrove.query import OffsetQuery, PositionQuery, QueryEngine
from logtrove.query.ids import decode_position_id
from logtrove.records import Record
from logtrove.records.bulk import batch_records
from logtrove.storage import PartitionLog, Storage
from logtrove.storage.txnview import CommittedView, committed_view

router = APIRouter(prefix="/api/v1", tags=["messages"])

OffsetPath = Annotated[int, Path(ge=0, le=2**62, description="Offset.")]
Limit = Annotated[int, Query(ge=1, le=1000, description="Most messages to return.")]
CtxDep = Annotated[HttpContext, Depends(get_context)]
READ_COMMITTED: Literal["read_committed"] = "read_committed"
IsolationParam = Annotated[
    Literal["read_committed", "read_uncommitted"],
    Query(
        description="read_committed (default): no records of aborted transactions and nothing past "
        "an open one (the last stable offset); read_uncommitted: every record. Markers never show."
    ),
]


def engine(request: Request) -> QueryEngine:
    """FastAPI dependency: the app's query engine."""
    found: QueryEngine = request.app.state.engine
    return found


EngineDep = Annotated[QueryEngine, Depends(engine)]


def id_header(storage: Storage, topic: str) -> str:
    return storage.topic(topic).config.message_id_header


def _records(
    log: PartitionLog, start: int, end: int | None, limit: int, header: str, view: CommittedView | None
) -> list[Message]:
    topic, partition = log.tp.topic, log.tp.partition
    return [
        render_message(QueryMessage.of(topic, partition, r), id_header=header)
        for r in islice(_shown(log, start, end, view), limit)
    ]


def _shown(log: PartitionLog, start: int, end: int | None, view: CommittedView | None) -> Iterator[Record]:
    """The data records in ``[start, end)`` that ``view`` shows (all with ``None``):
    control batches (transaction markers) are never shown. Each batch is decoded whole by
    the columnar decoder (:func:`~logtrove.records.bulk.batch_records`)."""
    begin = max(start, log.log_start_offset)
    if view is not None:
        end = view.last_stable_offset if end is None else min(end, view.last_stable_offset)
    for header, data in log.batches(begin, end):
        if header.is_control or (view is not None and view.hides_batch(header)):
            continue
        for record in batch_records(data, header):
            if begin <= record.offset and (end is None or record.offset < end):
                yield record


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets/{offset}",
    summary="The message at an offset (or the next surviving one on a compacted topic)",
    responses=problem_responses(404, 422),
)
def by_offset(
    topic: TopicPath,
    partition: PartitionPath,
    offset: OffsetPath,
    engine: EngineDep,
    storage: StorageDep,
    isolation: IsolationParam = READ_COMMITTED,
) -> Message:
    found, _ = engine.run(
        OffsetQuery(topic, partition, offset), read_committed=isolation == READ_COMMITTED
    ).all()
    return render_message(found[0], id_header=id_header(storage, topic))


@router.get(
    "/messages/{position_id}",
    summary="The message a broker position ID names",
    responses=problem_responses(404, 422),
)
def by_position(
    request: Request,
    position_id: Annotated[str, Path(min_length=1, max_length=400)],
    engine: EngineDep,
    storage: StorageDep,
    isolation: IsolationParam = READ_COMMITTED,
) -> Message:
    position = decode_position_id(position_id)
    if position is not None:  # else the query answers 422
        require(request, Operation.READ, ResourceType.TOPIC, position[0])
    found, _ = engine.run(PositionQuery(position_id), read_committed=isolation == READ_COMMITTED).all()
    return render_message(found[0], id_header=id_header(storage, found[0].topic))


@router.get(
    "/topics/{topic}/partitions/{partition}/offsets/{offset}/neighbours",
    summary="Messages around an offset",
    responses=problem_responses(404, 422),
)
def neighbours(
    topic: TopicPath,
    partition: PartitionPath,
    offset: OffsetPath,
    engine: EngineDep,
    storage: StorageDep,
    ctx: CtxDep,
    before: Annotated[int, Query(ge=0, le=500)] = 5,
    after: Annotated[int, Query(ge=0, le=500)] = 5,
    isolation: IsolationParam = READ_COMMITTED,
) -> MessagePage:
    engine.run(
        OffsetQuery(topic, partition, offset), read_committed=False
    ).all()  # the offset must be in the log
    log = storage.log(topic, partition)
    view = committed_view(log) if isolation == READ_COMMITTED else None
    header = id_header(storage, topic)
    first = max(offset - before, log.log_start_offset)
    earlier = _records(log, first, offset, before, header, view)
    later = _records(log, offset, None, after + 1, header, view)
    return MessagePage(
        messages=earlier + later,
        reason="range exhausted",
        cli=cli_command(str(ctx.storage.path), topic, [("--partition", partition), ("--offset", offset)]),
    )


@router.get(
    "/topics/{topic}/partitions/{partition}/messages",
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
    isolation: IsolationParam = READ_COMMITTED,
) -> MessagePage:
    """``next_cursor`` is the offset to pass as ``offset`` for the next page."""
    log = storage.log(topic, partition)
    start = log.log_start_offset if offset is None else offset
    view = committed_view(log) if isolation == READ_COMMITTED else None
    messages = _records(log, start, None, limit, id_header(storage, topic), view)
    more = len(messages) == limit and messages[-1].offset + 1 < log.log_end_offset
    return MessagePage(
        messages=messages,
        next_cursor=str(messages[-1].offset + 1) if more else None,
        reason="limit reached" if more else "range exhausted",
        cli=cli_command(str(ctx.storage.path), topic, [("--partition", partition), ("--offset", start)]),
    )
