"""``logtrove query TOPIC``: find messages by offset, time, range, ID, key, header or
content; and ``logtrove index``: bring the derived index files up to date."""

from __future__ import annotations

import base64
import json
import sys
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.table import Table

from logtrove.cli.app import app
from logtrove.cli.common import (
    DEFAULT_DATA,
    DataOption,
    Isolation,
    IsolationOption,
    JsonOption,
    console,
    err_console,
    fail,
    format_time,
    open_storage,
)
from logtrove.clock import parse_time
from logtrove.query import (
    Completion,
    Contains,
    ContentQuery,
    HeaderQuery,
    IdQuery,
    JsonField,
    KeyQuery,
    Message,
    OffsetQuery,
    Query,
    QueryEngine,
    QueryError,
    RangeQuery,
    Regex,
    TimeQuery,
)
from logtrove.query.predicates import Predicate
from logtrove.storage import Storage, TopicInfo
from logtrove.storage.derived.indexer import Indexer, build_segment_indexes, in_older_layout

_VALUE_WIDTH = 80


@app.command("query")
def query(
    topic: Annotated[str, typer.Argument(help="Topic to search.")],
    partition: Annotated[int | None, typer.Option("--partition", "-p", help="Only this partition.")] = None,
    offset: Annotated[
        int | None, typer.Option("--offset", help="The record at this offset (needs -p).")
    ] = None,
    time: Annotated[str | None, typer.Option("--time", help="First record at or after this time.")] = None,
    from_: Annotated[str | None, typer.Option("--from", help="Start of a time range (inclusive).")] = None,
    to: Annotated[str | None, typer.Option("--to", help="End of a time range (exclusive).")] = None,
    message_id: Annotated[str | None, typer.Option("--id", help="Client message ID or position ID.")] = None,
    key: Annotated[str | None, typer.Option("--key", help="Records with this key, newest first.")] = None,
    header: Annotated[str | None, typer.Option("--header", help="NAME=VALUE of an indexed header.")] = None,
    contains: Annotated[str | None, typer.Option("--contains", help="Values containing this text.")] = None,
    regex: Annotated[
        str | None, typer.Option("--regex", help="Values matching this regex (RE2 syntax).")
    ] = None,
    json_field: Annotated[
        str | None, typer.Option("--json-field", help="JSON values with PATH=VALUE, e.g. order.id=4711.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="Most results; 0 = no limit.")] = 100,
    cursor: Annotated[str | None, typer.Option("--cursor", help="Continue a previous query.")] = None,
    budget_mb: Annotated[
        float, typer.Option("--budget-mb", min=0.0, help="Content search: most MB to read; 0 = no limit.")
    ] = 1024.0,
    exhaustive: Annotated[
        bool, typer.Option("--exhaustive", help="--id: search every segment, not only around the ID's time.")
    ] = False,
    isolation: IsolationOption = Isolation.READ_COMMITTED,
    data: DataOption = DEFAULT_DATA,
    as_json: JsonOption = False,
) -> None:
    """Find messages without consuming the topic: from indexes, exactly. Committed data
    only unless --isolation read_uncommitted.

    Examples:

      logtrove query orders --partition 0 --offset 1520

      logtrove query orders --from 2026-11-22T10:00:00Z --to 2026-11-22T10:05:00Z

      logtrove query orders --key customer-42 --limit 10

      logtrove query orders --id 0AKY47P8W040H

      logtrove query orders --contains 'order 4711' --from 2026-11-22

      logtrove query orders --json-field order.status=failed --json
    """
    try:
        times = {
            name: parse_time(v) if v is not None else None
            for name, v in (("time", time), ("from", from_), ("to", to))
        }
    except ValueError as exc:
        fail(str(exc), 2)
    predicate = _predicate(contains, regex, json_field)
    with open_storage(data, read_only=True) as storage:
        q = _build(
            topic,
            partition,
            offset,
            times,
            message_id,
            key,
            header,
            predicate,
            limit or None,
            cursor,
            budget_mb,
            exhaustive,
        )
        engine = QueryEngine(storage)
        try:
            result = engine.run(q, read_committed=isolation is Isolation.READ_COMMITTED)
            if as_json:
                for message in result:
                    sys.stdout.write(json.dumps(message_json(message)) + "\n")
                completion = result.completion
                assert completion is not None
                err_console.print_json(json.dumps(completion_json(completion)))
            else:
                messages, completion = result.all()
                _print_table(topic, messages, completion)
        except QueryError as exc:
            fail(str(exc))


def _predicate(contains: str | None, regex: str | None, json_field: str | None) -> Predicate | None:
    given = [p for p in (contains, regex, json_field) if p is not None]
    if len(given) > 1:
        fail("use one of --contains, --regex and --json-field", 2)
    try:
        if contains is not None:
            return Contains(contains)
        if regex is not None:
            return Regex(regex)
        if json_field is not None:
            return JsonField.parse(json_field)
    except QueryError as exc:
        fail(str(exc), 2)
    return None


def _build(
    topic: str,
    partition: int | None,
    offset: int | None,
    times: dict[str, int | None],
    message_id: str | None,
    key: str | None,
    header: str | None,
    predicate: Predicate | None,
    limit: int | None,
    cursor: str | None,
    budget_mb: float,
    exhaustive: bool,
) -> Query:
    """The one question the flags ask; usage errors exit with code 2."""
    kinds = [
        name for name, v in (("--id", message_id), ("--key", key), ("--header", header)) if v is not None
    ]
    if predicate is not None:
        kinds.append("content")
    if offset is not None and not kinds:
        kinds.append("--offset")
    if len(kinds) > 1:
        fail(f"ask one question at a time: {', '.join(kinds)} given together", 2)
    parts = (partition,) if partition is not None else None
    start, end = times["from"], times["to"]
    if message_id is not None:
        return IdQuery(topic, message_id, parts, limit, cursor, exhaustive)
    if key is not None:
        return KeyQuery(topic, key.encode("utf-8"), parts, start, end, limit, cursor)
    if header is not None:
        name, sep, value = header.partition("=")
        if not sep or not name:
            fail(f"--header wants NAME=VALUE, got {header!r}", 2)
        return HeaderQuery(topic, name, value.encode("utf-8"), parts, start, end, limit, cursor)
    if predicate is not None:
        budget = int(budget_mb * 1024 * 1024) or None
        return ContentQuery(topic, predicate, parts, start, end, offset, None, limit, cursor, budget)
    if offset is not None:
        if partition is None:
            fail("--offset needs --partition", 2)
        return OffsetQuery(topic, partition, offset)
    if times["time"] is not None:
        return TimeQuery(topic, times["time"], parts)
    if start is not None or end is not None:
        return RangeQuery(
            topic,
            start if start is not None else 0,
            end if end is not None else 2**63 - 1,
            parts,
            limit,
            cursor,
        )
    return fail(
        "say what to find: --offset, --time, --from/--to, --id, --key, --header, --contains, --regex or --json-field",
        2,
    )


def _text(data: bytes | None) -> tuple[str | None, bool]:
    """(text, is_utf8) of some bytes."""
    if data is None:
        return None, True
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), False


def message_json(m: Message) -> dict[str, Any]:
    """One result as a JSON object: UTF-8 as strings, other bytes as ``*_b64``."""
    out: dict[str, Any] = {
        "topic": m.topic,
        "partition": m.partition,
        "offset": m.offset,
        "timestamp": m.timestamp,
    }
    for name, raw in (("key", m.key), ("value", m.value)):
        text, utf8 = _text(raw)
        out[name if utf8 else f"{name}_b64"] = text
    headers = []
    for hname, hval in m.headers:
        text, utf8 = _text(hval)
        headers.append({"key": hname, "value" if utf8 else "value_b64": text})
    out["headers"] = headers
    out["id"] = m.id
    return out


def completion_json(c: Completion) -> dict[str, Any]:
    s = c.stats
    return {
        "completion": str(c.reason),
        "results": c.results,
        "cursor": c.cursor,
        "bytes_scanned": s.bytes_scanned,
        "records_scanned": s.records_scanned,
        "segments_scanned": s.segments_scanned,
        "segments_skipped": s.segments_skipped,
        "blocks_skipped": s.blocks_skipped,
        "batches_prefiltered": s.batches_prefiltered,
        "notes": list(c.notes),
    }


def _short(data: bytes | None) -> str:
    text, utf8 = _text(data)
    if text is None:
        return "∅"
    if not utf8:
        text = "b64:" + text
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 1] + "…"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _print_table(topic: str, messages: list[Message], c: Completion) -> None:
    table = Table(title=f"{topic}: {c.results} message{'s' if c.results != 1 else ''}", title_justify="left")
    for column in ("partition", "offset", "timestamp", "key", "value", "headers", "id"):
        table.add_column(
            column, overflow="fold", justify="right" if column in ("partition", "offset") else "left"
        )
    for m in messages:
        headers = ", ".join(f"{k}={_short(v)}" for k, v in m.headers)
        table.add_row(
            str(m.partition),
            str(m.offset),
            format_time(m.timestamp),
            _short(m.key),
            _short(m.value),
            headers,
            m.id,
        )
    console.print(table)
    s = c.stats
    console.print(
        f"[bold]{c.reason}[/] · read {_size(s.bytes_scanned)}, {s.records_scanned} records parsed · "
        f"segments {s.segments_scanned} scanned, {s.segments_skipped} skipped · "
        f"{s.blocks_skipped} blocks skipped, {s.batches_prefiltered} batches prefiltered",
        highlight=False,
    )
    for note in c.notes:
        console.print(f"[dim]{note}[/]")
    if c.cursor:
        console.print(f"more: --cursor {c.cursor}", highlight=False, soft_wrap=True)


@app.command("index")
def index(
    topic: Annotated[str | None, typer.Argument(help="Only this topic (default: all).")] = None,
    data: DataOption = DEFAULT_DATA,
    upgrade: Annotated[
        bool,
        typer.Option(
            "--upgrade",
            help="First rewrite the indexes an older logtrove wrote in an older layout (still read, "
            "slower to probe); headers are indexed as index.headers says now.",
        ),
    ] = False,
) -> None:
    """Bring the key, tag and skip indexes up to date (the broker does this by itself;
    use this after writing with the CLI while no broker runs)."""
    with open_storage(data, read_only=False) as storage:
        if topic is not None:
            storage.topic(topic)
        if upgrade:
            _upgrade(storage, [storage.topic(topic)] if topic is not None else storage.topics())
        indexer = Indexer(storage, topics=None if topic is None else {topic})
        n = indexer.catch_up()
        console.print(f"indexed {n} records")


def _upgrade(storage: Storage, topics: list[TopicInfo]) -> None:
    """Rewrite every segment index of ``topics`` that holds blocks of an older layout."""
    older = [
        (t.config, seg)
        for t in topics
        for p in range(t.partitions)
        for seg in storage.log(t.name, p).segments
        if in_older_layout(seg)
    ]
    with Progress(
        TextColumn("rewriting indexes"), BarColumn(), TaskProgressColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task("", total=len(older))
        for config, seg in older:
            build_segment_indexes(seg, config)
            progress.advance(task)
    console.print(f"rewrote the indexes of {len(older)} segments in the current layout")
