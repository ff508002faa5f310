"""``logtrove consume TOPIC``: print records, kcat-style, optionally as a group and by tag.

Records are read by :class:`~logtrove.groups.consumer.TagConsumer`, filtered where the
data is: with ``--tags`` only the records of those tags are read, found through
``.tagidx``, and the rest never leave the broker.

* Without ``--bootstrap`` it reads the data directory (read-only, so also while the
  broker runs, on its machine); with ``--group`` it commits into that directory, which
  it then holds for writing (no broker may run).
* With ``--bootstrap`` it works through the broker: records of some tags come from the
  broker's HTTP API (``--http``, default the broker host on port 8080), which filters with
  ``.tagidx`` next to the data; every record (``--tags '*'``, the default) comes over
  Kafka Fetch, so that works with any Kafka broker; commits go over the Kafka protocol.
  When the data directory
  given (or ``./data``) is that broker's own and ``--http`` is not given, it is read
  directly instead (same machine, no HTTP).

A commit moves past skipped records, so the group's lag reaches 0 once every matching
record is consumed.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from logtrove.cli.app import app
from logtrove.cli.common import (
    DEFAULT_DATA,
    DataOption,
    Isolation,
    IsolationOption,
    JsonOption,
    cli_errors,
    fail,
)
from logtrove.cli.query import message_json
from logtrove.cli.remote import BootstrapOption, HttpOption, connect, http_errors
from logtrove.client import BrokerCommitter, HttpApi, RemoteTagSource, cluster_id, http_url, open_brokers_data
from logtrove.clock import ascii_int, parse_time
from logtrove.groups.consumer import (
    EARLIEST,
    LATEST,
    ConsumedRecord,
    OffsetCommitter,
    StartAt,
    StoreCommitter,
    TagConsumer,
    TagSource,
)
from logtrove.groups.tags import InvalidTagExpressionError, TagFilter
from logtrove.query import Message
from logtrove.storage import Storage


def parse_offset(text: str) -> StartAt:
    """``beginning`` | ``end`` | ``N`` | ``-N`` (N before the end) | ``s@TIME`` (kcat's forms)."""
    raw = text.strip()
    if raw in ("beginning", "earliest"):
        return StartAt(EARLIEST)
    if raw in ("end", "latest"):
        return StartAt(LATEST)
    if raw.startswith("s@"):
        return StartAt(timestamp=parse_time(raw[2:]))
    n = ascii_int(raw, signed=True)
    if n is not None:
        return StartAt(offset=n) if n >= 0 else StartAt(LATEST, from_end=-n)
    raise ValueError(
        f"cannot read offset {text!r}: use beginning, end, N, -N or s@TIME (e.g. s@2026-01-05T10:00:00Z)"
    )


def _text(data: bytes | None) -> str:
    if data is None:
        return "NULL"
    return data.decode("utf-8", "backslashreplace")


def _line(c: ConsumedRecord, show_headers: bool) -> str:
    r = c.record
    parts = [f"{c.partition}:{r.offset}", _text(r.key), _text(r.value)]
    if show_headers and r.headers:
        parts.append(",".join(f"{k}={_text(v)}" for k, v in r.headers))
    return "\t".join(parts)


@contextlib.contextmanager
def _opened(
    data: Path, group: str | None, bootstrap: str | None, http: str | None, read_committed: bool
) -> Iterator[tuple[Storage | TagSource, OffsetCommitter | None]]:
    """Where records are read from, and where commits go."""
    if bootstrap is None:
        read_only = group is None
        holder = None if read_only else "logtrove consume --group"
        with cli_errors():
            storage = Storage.open(data, read_only=read_only, holder=holder)
        try:
            with cli_errors():
                yield storage, None if read_only else StoreCommitter(storage)
        finally:
            storage.close()
        return
    with connect(bootstrap) as client, cli_errors(), http_errors():
        cluster = cluster_id(client)
        committer = BrokerCommitter(client) if group is not None else None
        local = open_brokers_data(data, cluster) if http is None else None
        if local is None:
            api = HttpApi(http_url(bootstrap, http), cluster_id=cluster)
            yield RemoteTagSource(client, api, read_committed=read_committed), committer
            return
        try:
            yield local, committer
        finally:
            local.close()


@app.command()
def consume(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    group: Annotated[
        str | None,
        typer.Option("--group", "-G", help="Consume as this group: start from its commits, commit progress."),
    ] = None,
    tags: Annotated[
        str, typer.Option("--tags", help="Only records with these tags: 'TagA || TagB' ('*': all).")
    ] = "*",
    offset: Annotated[
        str,
        typer.Option(
            "--offset", "-o", help="Where to start without a commit: beginning, end, N, -N, s@TIME."
        ),
    ] = "beginning",
    partition: Annotated[
        list[int] | None, typer.Option("--partition", "-p", help="Only this partition (repeatable).")
    ] = None,
    count: Annotated[int | None, typer.Option("--count", "-c", min=1, help="Stop after N records.")] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep waiting for new records (Ctrl-C stops).")
    ] = False,
    ignore_committed: Annotated[
        bool, typer.Option("--ignore-committed", help="With --group: start from --offset anyway.")
    ] = False,
    headers: Annotated[
        bool, typer.Option("--headers/--no-headers", help="Print headers (text output).")
    ] = True,
    isolation: IsolationOption = Isolation.READ_COMMITTED,
    data: DataOption = DEFAULT_DATA,
    bootstrap: BootstrapOption = None,
    http: HttpOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the records of TOPIC: one line each (partition:offset, key, value, headers),
    or JSON lines with --json. Reads the data directory (read-only); with --bootstrap,
    reads through the broker instead, from any machine: every record over the Kafka
    protocol, or with --tags the records of those tags from its HTTP API (--http,
    filtered there); commits go over the Kafka protocol. Committed data only (as a
    read_committed Kafka consumer) unless --isolation read_uncommitted.

    Examples:

      logtrove consume orders -o beginning --count 10

      logtrove consume orders --json -o s@2026-01-05T10:00:00Z

      logtrove consume orders --group billing --tags 'TagA || TagB' --follow --bootstrap 127.0.0.1:9092

      logtrove consume orders -G billing --tags TagA -b broker:9092 --http http://broker:8080
    """
    try:
        wanted = TagFilter.parse(tags)
        start = parse_offset(offset)
    except (InvalidTagExpressionError, ValueError) as exc:
        fail(str(exc), 2)
    read_committed = isolation is Isolation.READ_COMMITTED
    with _opened(data, group, bootstrap, http, read_committed) as (source, committer):
        with cli_errors():
            consumer = TagConsumer(
                source,
                topic,
                wanted,
                group=group,
                committer=committer,
                start=start,
                partitions=partition,
                ignore_committed=ignore_committed,
                read_committed=read_committed,
            )
        printed = 0
        try:
            while count is None or printed < count:
                batch = consumer.poll(500 if count is None else min(500, count - printed))
                for c in batch:
                    if as_json:
                        typer.echo(json.dumps(message_json(Message.of(c.topic, c.partition, c.record))))
                    else:
                        typer.echo(_line(c, headers))
                printed += len(batch)
                if batch:
                    sys.stdout.flush()  # a pipe is block-buffered: show records as they come
                if group is not None:
                    consumer.commit()
                if not batch:
                    if not follow:
                        break
                    time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            if group is not None:
                consumer.commit()
