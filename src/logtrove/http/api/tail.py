"""``GET /api/v1/topics/{topic}/tail``: follow new records as server-sent events
(:mod:`logtrove.http.tail` describes the stream and its bounds)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated

import anyio
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from logtrove.acl import Operation, ResourceType
from logtrove.http.api.messages import CtxDep
from logtrove.http.api.search import Partition
from logtrove.http.api.topics import TopicPath
from logtrove.http.problems import problem_responses
from logtrove.http.security import still_allowed
from logtrove.http.tail import Tail, TailFilter, TailHub, parse_cursor

router = APIRouter(prefix="/api/v1/topics/{topic}", tags=["messages"])

RECHECK_S = 1.0
"""How often, at most, an open tail checks again that its credential and READ right still
hold (before the next event it sends): a revoked token or ACL ends it within a second of
data, or at the next heartbeat."""

FilterText = Annotated[str | None, Query(max_length=1024)]


def hub_of(request: Request) -> TailHub:
    hub: TailHub = request.app.state.tails
    return hub


@router.get(
    "/tail",
    summary="Follow new records (server-sent events), optionally filtered by key, tag or text",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "An endless event stream."},
        **problem_responses(404, 422, 503),
    },
)
async def tail(
    topic: TopicPath,
    request: Request,
    ctx: CtxDep,
    key: Annotated[str | None, Query(max_length=1024, description="Only records with this key.")] = None,
    tag: Annotated[str | None, Query(max_length=1024, description="Only records with this tag.")] = None,
    contains: Annotated[
        str | None, Query(max_length=1024, description="Only values holding this text.")
    ] = None,
    partition: Partition = None,
    cursor: Annotated[str | None, Query(max_length=65536, description="Resume here (an event's id).")] = None,
    last_event_id: Annotated[str | None, Header(max_length=65536)] = None,
) -> StreamingResponse:
    hub = hub_of(request)
    storage = ctx.fresh_storage()
    info = storage.topic(topic)
    wanted = range(info.partitions) if partition is None else (partition,)
    if partition is not None and partition >= info.partitions:
        storage.log(topic, partition)  # raises the unknown-partition problem
    resume = parse_cursor(last_event_id or cursor or "", info.partitions)
    match = TailFilter(
        key=None if key is None else key.encode(),
        tag=None if tag is None else tag.encode(),
        contains=None if contains is None else contains.encode(),
        tag_header=info.config.message_tag_header,
    )
    following = Tail(ctx, hub, topic, {p: resume.get(p) for p in wanted}, match)
    hub.admit()

    async def stream() -> AsyncIterator[str]:
        checked = time.monotonic()
        try:
            async for chunk in following.events():
                if time.monotonic() - checked >= RECHECK_S:
                    if not await anyio.to_thread.run_sync(
                        still_allowed, request, Operation.READ, ResourceType.TOPIC, topic
                    ):
                        yield f"event: error\ndata: {json.dumps({'detail': 'access revoked'})}\n\n"
                        return
                    checked = time.monotonic()
                yield chunk
        finally:
            hub.release()

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
