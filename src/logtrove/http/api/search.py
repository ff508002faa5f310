"""Finding messages across a topic's partitions: by time, time range, key, header,
message ID and content — each a thin wrapper of one :mod:`logtrove.query` question.

Multi-result answers are pages: ``limit`` messages, then ``next_cursor`` (pass it back
as ``cursor``) and the completion ``reason``. Content search can also stream
(``stream=true``): NDJSON, one message per line as it is found, then one line
``{"completion": {...}}`` (or ``{"error": problem}`` if the scan fails midway).

Routes are plain ``def``: FastAPI runs them in its worker threads, never on the event
loop, and a content search also stops at the app's time limit (reason "budget exhausted").
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Iterator
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from logtrove.http.api.messages import READ_COMMITTED, CtxDep, EngineDep, IsolationParam, id_header
from logtrove.http.api.topics import StorageDep, TopicPath
from logtrove.http.models import MessagePage, ScanStats
from logtrove.http.problems import bad_request, problem_from_exception, problem_responses
from logtrove.http.render import cli_command, parse_time, render_message
from logtrove.query import (
    Completion,
    Contains,
    ContentQuery,
    HeaderQuery,
    IdQuery,
    JsonField,
    KeyQuery,
    Predicate,
    QueryResult,
    RangeQuery,
    Regex,
    TimeQuery,
)

router = APIRouter(prefix="/api/v1/topics/{topic}/messages", tags=["search"])

NDJSON = "application/x-ndjson"
_log = logging.getLogger("logtrove.http")
Limit = Annotated[int, Query(ge=1, le=1000, description="Most messages in this page.")]
Cursor = Annotated[str | None, Query(max_length=4096, description="`next_cursor` of the previous page.")]
Partition = Annotated[int | None, Query(ge=0, le=9_999, description="Only this partition.")]
TimeParam = Annotated[str | None, Query(max_length=64, description="Epoch ms or ISO-8601.")]
FromParam = Annotated[str | None, Query(alias="from", max_length=64, description="Epoch ms or ISO-8601.")]


def _time(value: str | None, name: str) -> int | None:
    return None if value is None else parse_time(value, name)


def _parts(partition: int | None) -> tuple[int, ...] | None:
    return None if partition is None else (partition,)


def _page(storage_header: str, result: QueryResult, cli: str, *, stats: bool = True) -> MessagePage:
    found, completion = result.all()
    return MessagePage(
        messages=[render_message(m, id_header=storage_header) for m in found],
        next_cursor=completion.cursor,
        reason=completion.reason.value,
        stats=ScanStats(**asdict(completion.stats)) if stats else None,
        notes=list(completion.notes),
        cli=cli,
    )


@router.get(
    "/at",
    summary="In each partition, the first message with timestamp ≥ time",
    responses=problem_responses(404, 422),
)
def at_time(
    topic: TopicPath,
    engine: EngineDep,
    storage: StorageDep,
    ctx: CtxDep,
    time: Annotated[str, Query(max_length=64, description="Epoch ms or ISO-8601.")],
    partition: Partition = None,
    isolation: IsolationParam = READ_COMMITTED,
) -> MessagePage:
    question = TimeQuery(topic, parse_time(time, "time"), _parts(partition))
    result = engine.run(question, read_committed=isolation == READ_COMMITTED)
    cli = cli_command(str(ctx.storage.path), topic, [("--partition", partition), ("--time", time)])
    return _page(id_header(storage, topic), result, cli, stats=False)


@router.get(
    "/range",
    summary="Messages with from ≤ timestamp < to, oldest first per partition",
    responses=problem_responses(404, 422),
)
def time_range(
    topic: TopicPath,
    engine: EngineDep,
    storage: StorageDep,
    ctx: CtxDep,
    from_: FromParam = None,
    to: TimeParam = None,
    partition: Partition = None,
    limit: Limit = 50,
    cursor: Cursor = None,
    isolation: IsolationParam = READ_COMMITTED,
) -> MessagePage:
    start, end = _time(from_, "from"), _time(to, "to")
    question = RangeQuery(
        topic, start or 0, 2**63 - 1 if end is None else end, _parts(partition), limit, cursor
    )
    cli = cli_command(
        str(ctx.storage.path),
        topic,
        [
            ("--partition", partition),
            ("--from", from_),
            ("--to", to),
            ("--limit", limit),
            ("--cursor", cursor),
        ],
    )
    return _page(
        id_header(storage, topic), engine.run(question, read_committed=isolation == READ_COMMITTED), cli
    )


def _key_bytes(key: str | None, key_b64: str | None) -> bytes:
    if (key is None) == (key_b64 is None):
        raise bad_request("give exactly one of key and key_b64")
    if key is not None:
        return key.encode()
    try:
        return base64.b64decode(key_b64 or "", validate=True)
    except (binascii.Error, ValueError):
        raise bad_request("key_b64 is not valid base64") from None


@router.get(
    "/by-key", summary="Every message with a key, newest first", responses=problem_responses(404, 422)
)
def by_key(
    topic: TopicPath,
    engine: EngineDep,
    storage: StorageDep,
    ctx: CtxDep,
    key: Annotated[str | None, Query(max_length=4096, description="The key as UTF-8 text.")] = None,
    key_b64: Annotated[str | None, Query(max_length=5464, description="The key in base64.")] = None,
    from_: FromParam = None,
    to: TimeParam = None,
    partition: Partition = None,
    limit: Limit = 50,
    cursor: Cursor = None,
    isolation: IsolationParam = READ_COMMITTED,
) -> MessagePage:
    raw = _key_bytes(key, key_b64)
    question = KeyQuery(topic, raw, _parts(partition), _time(from_, "from"), _time(to, "to"), limit, cursor)
    cli = cli_command(
        str(ctx.storage.path),
        topic,
        [
            ("--key", key if key is not None else f"<base64 {key_b64}>"),
            ("--partition", partition),
            ("--from", from_),
            ("--to", to),
            ("--limit", limit),
            ("--cursor", cursor),
        ],
    )
    return _page(
        id_header(storage, topic), engine.run(question, read_committed=isolation == READ_COMMITTED), cli
    )


@router.get(
    "/by-header",
    summary="Every message carrying header name = value (an `index.headers` header), newest first",
    responses=problem_responses(404, 422),
)
def by_header(
    topic: TopicPath,
    engine: EngineDep,
    storage: StorageDep,
    ctx: CtxDep,
    name: Annotated[str, Query(min_length=1, max_length=1000)],
    value: Annotated[str, Query(max_length=4096)],
    from_: FromParam = None,
    to: TimeParam = None,
    partition: Partition = None,
    limit: Limit = 50,
    cursor: Cursor = None,
    isolation: IsolationParam = READ_COMMITTED,
) -> MessagePage:
    question = HeaderQuery(
        topic, name, value.encode(), _parts(partition), _time(from_, "from"), _time(to, "to"), limit, cursor
    )
    cli = cli_command(
        str(ctx.storage.path),
        topic,
        [
            ("--header", f"{name}={value}"),
            ("--partition", partition),
            ("--from", from_),
            ("--to", to),
            ("--limit", limit),
            ("--cursor", cursor),
        ],
    )
    return _page(
        id_header(storage, topic), engine.run(question, read_committed=isolation == READ_COMMITTED), cli
    )


@router.get(
    "/by-id",
    summary="Messages by client message ID (the topic's ID header) or broker position ID",
    responses=problem_responses(404, 422),
)
def by_id(
    topic: TopicPath,
    engine: EngineDep,
    storage: StorageDep,
    ctx: CtxDep,
    id: Annotated[str, Query(min_length=1, max_length=1000, description="Message ID.")],
    exhaustive: Annotated[
        bool, Query(description="Search every segment, not only those around a time-ordered ID's time.")
    ] = False,
    partition: Partition = None,
    limit: Limit = 50,
    cursor: Cursor = None,
    isolation: IsolationParam = READ_COMMITTED,
) -> MessagePage:
    question = IdQuery(topic, id, _parts(partition), limit, cursor, exhaustive)
    cli = cli_command(
        str(ctx.storage.path),
        topic,
        [
            ("--id", id),
            ("--partition", partition),
            ("--exhaustive", exhaustive),
            ("--limit", limit),
            ("--cursor", cursor),
        ],
    )
    return _page(
        id_header(storage, topic), engine.run(question, read_committed=isolation == READ_COMMITTED), cli
    )


def _predicate(
    contains: str | None, regex: str | None, json_field: str | None
) -> tuple[Predicate, tuple[str, str]]:
    given = [
        (n, v)
        for n, v in (("contains", contains), ("regex", regex), ("json_field", json_field))
        if v is not None
    ]
    if len(given) != 1:
        raise bad_request("give exactly one of contains, regex and json_field")
    name, text = given[0]
    if name == "contains":
        return Contains(text), ("--contains", text)
    if name == "regex":
        return Regex(text), ("--regex", text)
    return JsonField.parse(text), ("--json-field", text)


@router.get(
    "/search",
    summary="Content search: substring, regex or JSON field = value, all partitions in parallel",
    responses={
        **problem_responses(404, 422),
        200: {"content": {NDJSON: {}}, "description": "A page, or NDJSON with stream=true"},
    },
)
def search(
    topic: TopicPath,
    engine: EngineDep,
    storage: StorageDep,
    ctx: CtxDep,
    contains: Annotated[
        str | None, Query(max_length=4096, description="Values containing this text.")
    ] = None,
    regex: Annotated[
        str | None,
        Query(
            max_length=4096,
            description="Values matching this regex (RE2 syntax: no backreferences or lookaround).",
        ),
    ] = None,
    json_field: Annotated[
        str | None, Query(max_length=4096, description="JSON values with PATH=VALUE, e.g. order.id=4711.")
    ] = None,
    from_: FromParam = None,
    to: TimeParam = None,
    start_offset: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    end_offset: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    partition: Partition = None,
    budget_mb: Annotated[
        float,
        Query(
            ge=0,
            le=1_000_000,
            description="Most MB to read; 0 = no byte limit (the server's time limit stays).",
        ),
    ] = 1024,
    limit: Annotated[int, Query(ge=1, le=100_000, description="Most messages.")] = 50,
    cursor: Cursor = None,
    stream: Annotated[bool, Query(description="Stream NDJSON as results are found.")] = False,
    isolation: IsolationParam = READ_COMMITTED,
) -> Any:
    predicate, option = _predicate(contains, regex, json_field)
    budget = int(budget_mb * 1024 * 1024) or None
    question = ContentQuery(
        topic,
        predicate,
        _parts(partition),
        _time(from_, "from"),
        _time(to, "to"),
        start_offset,
        end_offset,
        limit,
        cursor,
        budget,
    )
    cli = cli_command(
        str(ctx.storage.path),
        topic,
        [
            option,
            ("--partition", partition),
            ("--from", from_),
            ("--to", to),
            ("--offset", start_offset),
            ("--budget-mb", f"{budget_mb:g}" if budget_mb != 1024 else None),
            ("--limit", limit),
            ("--cursor", cursor),
        ],
    )
    result = engine.run(question, read_committed=isolation == READ_COMMITTED)
    header = id_header(storage, topic)
    if not stream:
        return _page(header, result, cli)
    return StreamingResponse(_ndjson(result, header, cli), media_type=NDJSON)


def _completion_json(completion: Completion, cli: str) -> dict[str, Any]:
    return {
        "reason": completion.reason.value,
        "results": completion.results,
        "next_cursor": completion.cursor,
        "stats": asdict(completion.stats),
        "notes": list(completion.notes),
        "cli": cli,
    }


def _ndjson(result: QueryResult, header: str, cli: str) -> Iterator[str]:
    try:
        for message in result:
            yield render_message(message, id_header=header).model_dump_json() + "\n"
        assert result.completion is not None
        yield json.dumps({"completion": _completion_json(result.completion, cli)}) + "\n"
    except Exception as exc:  # the status line is sent: report in the stream itself
        problem = problem_from_exception(exc)
        if problem is None or problem.status >= 500:
            _log.error("content search failed midway", exc_info=exc)
        detail = problem.detail if problem else "the search failed; see the server log"
        yield json.dumps({"error": {"status": problem.status if problem else 500, "detail": detail}}) + "\n"
    finally:
        result.close()
