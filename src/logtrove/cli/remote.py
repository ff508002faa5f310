"""``--bootstrap HOST:PORT`` and ``--http``: the commands through a running broker
instead of the data directory (which the broker holds locked).

The requests are :mod:`logtrove.client`'s; this module holds the options, turns client
errors into CLI errors, and prints like the local commands (sizes on disk and compaction
status are only known locally and are left out).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from logtrove.cli.common import CLIENT_CONFIG_ENV, console, err_console, fail
from logtrove.client import (
    ClientSecurity,
    HttpApiError,
    KafkaClient,
    KafkaProtocolError,
    http_url,
)
from logtrove.client.admin import (
    alter_topic_configs,
    grow_partitions,
    list_offsets,
    metadata,
    topic_configs,
    topic_partitions,
)
from logtrove.client.admin import (
    create_topic as create_remote_topic,
)
from logtrove.client.admin import (
    delete_topic as delete_remote_topic,
)
from logtrove.client.local import indexed_offsets
from logtrove.wire import EARLIEST, LATEST

BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap",
        "-b",
        envvar="LOGTROVE_BOOTSTRAP",
        help="Work through a running broker at HOST:PORT instead of the data directory "
        "(TLS / SASL: a librdkafka-style properties file named by LOGTROVE_CLIENT_CONFIG).",
    ),
]

HttpOption = Annotated[
    str | None,
    typer.Option(
        "--http",
        envvar="LOGTROVE_HTTP",
        help="With --bootstrap: the broker's HTTP API (URL or HOST:PORT), for what only its "
        "files know (tag filters and counts, indexed offsets). Default: the --bootstrap host, "
        "port 8080.",
        show_default=False,
    ),
]


@contextlib.contextmanager
def http_errors() -> Iterator[None]:
    """Turn :class:`HttpApiError` into a CLI error (exit code 1)."""
    try:
        yield
    except HttpApiError as exc:
        fail(str(exc))


@contextlib.contextmanager
def connect(bootstrap: str) -> Iterator[KafkaClient]:
    """A client, with broker and connection errors turned into CLI errors."""
    try:
        config = os.environ.get(CLIENT_CONFIG_ENV)
        security = ClientSecurity.load(Path(config)) if config else None
        client = KafkaClient(bootstrap, security=security)
    except (OSError, ValueError, KafkaProtocolError) as exc:
        fail(f"cannot connect to the broker at {bootstrap}: {exc}")
    try:
        with client:
            yield client
    except KafkaProtocolError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"connection to the broker at {bootstrap} failed: {exc}")


def _offsets(client: KafkaClient, topic: str, partitions: int, timestamp: int) -> list[int]:
    found = list_offsets(client, topic, range(partitions), timestamp)
    return [found[p] for p in range(partitions)]


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str], as_json: bool) -> None:
    with connect(bootstrap) as client:
        result = create_remote_topic(client, name, partitions, configs)
    if as_json:
        console.print_json(
            json.dumps({"name": name, "topic_id": str(result.topic_id), "partitions": partitions})
        )
    else:
        console.print(f"Created topic [bold]{name}[/] with {partitions} partition(s).")


def list_topics(bootstrap: str, internal: bool, as_json: bool) -> None:
    with connect(bootstrap) as client:
        rows = []
        for t in sorted(metadata(client, None).topics, key=lambda t: t.name):
            if (t.is_internal and not internal) or (t.name.startswith("__") and not internal):
                continue
            n = len(t.partitions)
            starts, ends = _offsets(client, t.name, n, EARLIEST), _offsets(client, t.name, n, LATEST)
            rows.append({"name": t.name, "partitions": n, "messages": sum(ends) - sum(starts)})
    if as_json:
        console.print_json(json.dumps(rows))
        return
    table = Table("topic", "partitions", "messages (approx.)")
    for row in rows:
        table.add_row(row["name"], str(row["partitions"]), f"{row['messages']:,}")
    console.print(table if rows else "[dim]no topics[/]")


def describe_topic(bootstrap: str, name: str, as_json: bool, *, data: Path, http: str | None) -> None:
    """Offsets and configs over the Kafka protocol; how far the broker's indexer got from
    its data directory when it is this machine's ``data`` (and ``http`` is not given),
    else from its HTTP API. Without either, the indexed offsets are left out with a
    warning: the rest of the answer does not depend on them."""
    with connect(bootstrap) as client:
        n = topic_partitions(client, name)
        if n is None:
            fail(f"unknown topic {name!r} at {bootstrap}")
        starts, ends = _offsets(client, name, n, EARLIEST), _offsets(client, name, n, LATEST)
        found = topic_configs(client, name)
        indexed = _indexed_offsets(client, bootstrap, name, data, http)
    configs = [
        {"name": c.name, "value": c.value, "source": "topic" if c.set_on_topic else "default"} for c in found
    ]
    partitions: list[dict[str, Any]] = [
        {"partition": p, "log_start_offset": starts[p], "log_end_offset": ends[p]} for p in range(n)
    ]
    if indexed is not None:
        for row in partitions:
            row["indexed_offset"] = indexed.get(row["partition"])
    if as_json:
        console.print_json(
            json.dumps({"name": name, "partitions": n, "partition_details": partitions, "configs": configs})
        )
        return
    console.print(f"[bold]{name}[/]  ({bootstrap})")
    columns = ["partition", "log start", "log end"] + (["indexed below"] if indexed is not None else [])
    table = Table(*columns)
    for p in partitions:
        cells = [str(p["partition"]), f"{p['log_start_offset']:,}", f"{p['log_end_offset']:,}"]
        if indexed is not None:
            cells.append("-" if p["indexed_offset"] is None else f"{p['indexed_offset']:,}")
        table.add_row(*cells)
    console.print(table)
    config_table = Table("config", "value", "source")
    for c in configs:
        config_table.add_row(
            c["name"], c["value"] or "", c["source"], style=None if c["source"] == "topic" else "dim"
        )
    console.print(config_table)


def _indexed_offsets(
    client: KafkaClient, bootstrap: str, name: str, data: Path, http: str | None
) -> dict[int, int | None] | None:
    """:func:`~logtrove.client.local.indexed_offsets`, or ``None`` with a warning when
    neither the broker's data directory nor its HTTP API can be read."""
    try:
        return indexed_offsets(client, name, data, http_url(bootstrap, http), local=http is None)
    except HttpApiError as exc:
        err_console.print(f"[yellow]warning:[/] indexed offsets left out: {exc}", highlight=False)
        return None


def alter_topic(
    bootstrap: str, name: str, sets: dict[str, str], deletes: list[str], partitions: int | None
) -> None:
    with connect(bootstrap) as client:
        if sets or deletes:
            alter_topic_configs(client, name, sets, deletes)
        if partitions is not None:
            grow_partitions(client, name, partitions)
    console.print(f"Altered topic [bold]{name}[/].")


def delete_topic(bootstrap: str, name: str) -> None:
    with connect(bootstrap) as client:
        delete_remote_topic(client, name)
    console.print(f"Deleted topic [bold]{name}[/].")
