"""``logtrove topics …``: create, list, describe, alter and delete topics."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from logtrove.cli import remote
from logtrove.cli.app import app
from logtrove.cli.common import (
    DEFAULT_DATA,
    DataOption,
    JsonOption,
    console,
    err_console,
    fail,
    format_time,
    open_storage,
)
from logtrove.cli.remote import BootstrapOption, HttpOption
from logtrove.storage import CONFIG_DEFS, Storage, TopicInfo, recorded_index_offsets
from logtrove.storage.cleaner import status_of
from logtrove.storage.follow import read_follow_status
from logtrove.storage.names import escaped_name

topics_app = typer.Typer(
    help="Create, list, describe, alter and delete topics.",
    no_args_is_help=True,
)
app.add_typer(topics_app, name="topics")


def parse_config_pairs(pairs: list[str] | None) -> dict[str, str]:
    """``["retention.ms=1000", …]`` → dict; a pair without ``=`` is an error."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            fail(f"--config expects NAME=VALUE, got {pair!r} (e.g. --config retention.ms=86400000)", 2)
        out[name.strip()] = value.strip()
    return out


@topics_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Topic name: letters, digits, '.', '_', '-'.")],
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1, help="Number of partitions.")] = 1,
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="Topic config NAME=VALUE (repeatable).")
    ] = None,
    data: DataOption = DEFAULT_DATA,
    as_json: JsonOption = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Create a topic.

    Examples:

      logtrove topics create orders --partitions 3

      logtrove topics create users --config cleanup.policy=compact --config segment.bytes=104857600
    """
    configs = parse_config_pairs(config)
    if bootstrap:
        remote.create_topic(bootstrap, name, partitions, configs, as_json)
        return
    with open_storage(data, read_only=False) as storage:
        info = storage.create_topic(name, partitions, configs)
    if as_json:
        console.print_json(json.dumps(_topic_json(info)))
    else:
        console.print(f"Created topic [bold]{info.name}[/] with {info.partitions} partition(s).")


@topics_app.command("list")
def list_topics(
    data: DataOption = DEFAULT_DATA,
    as_json: JsonOption = False,
    internal: Annotated[bool, typer.Option("--internal", help="Include internal topics (__*).")] = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """List topics with their partition counts and sizes.

    Topic files that cannot be loaded (e.g. a name with a newline, written by an older
    version) are listed after the table with the reason and the topic id to delete them
    by; with --json they are rows with an "invalid" field.

    Example: logtrove topics list --json
    """
    if bootstrap:
        remote.list_topics(bootstrap, internal, as_json)
        return
    with open_storage(data, read_only=True) as storage:
        rows: list[dict[str, Any]] = []
        for info in storage.topics():
            if info.internal and not internal:
                continue
            logs = [storage.log(info.name, p) for p in range(info.partitions)]
            rows.append(
                {
                    "name": info.name,
                    "partitions": info.partitions,
                    "messages": sum(log.log_end_offset - log.log_start_offset for log in logs),
                    "bytes": sum(log.size_bytes for log in logs),
                    "cleanup.policy": info.config.cleanup_policy,
                }
            )
        invalid = storage.invalid_topics()
    bad_rows = [
        {
            "name": bad.shown,
            "file": escaped_name(str(bad.file)),
            "topic_id": None if bad.topic_id is None else str(bad.topic_id),
            "partitions": bad.partitions,
            "invalid": bad.reason,
        }
        for bad in invalid
    ]
    if as_json:
        console.print_json(json.dumps(rows + bad_rows))
        return
    table = Table("topic", "partitions", "messages (approx.)", "size", "cleanup.policy")
    for row in rows:
        table.add_row(
            row["name"],
            str(row["partitions"]),
            f"{row['messages']:,}",
            _size(row["bytes"]),
            row["cleanup.policy"],
        )
    console.print(table if rows else "[dim]no topics[/]")
    for bad in invalid:
        err_console.print(
            f"[bold yellow]invalid topic[/] {escape(bad.shown)} ({escape(escaped_name(str(bad.file)))}): "
            f"{escape(bad.reason)}; remove it with `logtrove topics delete {escape(str(bad.topic_id or bad.shown))}`",
            highlight=False,
            soft_wrap=True,
        )


@topics_app.command("describe")
def describe(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    data: DataOption = DEFAULT_DATA,
    as_json: JsonOption = False,
    bootstrap: BootstrapOption = None,
    http: HttpOption = None,
) -> None:
    """Show a topic's partitions (offsets, how far they are indexed, sizes, segments) and configs.

    With --bootstrap, offsets and configs come over the Kafka protocol; how far the
    indexer got comes from the broker's data directory when --data is it (on the
    broker's machine), else from its HTTP API (--http).

    Example: logtrove topics describe orders
    """
    if bootstrap:
        remote.describe_topic(bootstrap, name, as_json, data=data, http=http)
        return
    with open_storage(data, read_only=True) as storage:
        info = storage.topic(name)
        out = _topic_json(info)
        indexed = recorded_index_offsets(storage.path)
        out["partition_details"] = [
            _partition_json(storage, name, p, indexed.get((name, p))) for p in range(info.partitions)
        ]
        followed = _mirror_json(storage, info)
    if followed is not None:
        out["mirror"] = followed
    if as_json:
        console.print_json(json.dumps(out))
        return
    console.print(f"[bold]{info.name}[/]  id {info.topic_id}  created {format_time(info.created_ms)}")
    if followed is not None:
        _print_mirror(followed)
    table = Table("partition", "log start", "log end", "indexed below", "size", "segments", "max timestamp")
    for p in out["partition_details"]:
        table.add_row(
            str(p["partition"]),
            f"{p['log_start_offset']:,}",
            f"{p['log_end_offset']:,}",
            "-" if p["indexed_offset"] is None else f"{p['indexed_offset']:,}",
            _size(p["size_bytes"]),
            str(p["segments"]),
            format_time(p["max_timestamp"]),
        )
    console.print(table)
    if info.config.compact:
        cleaning = Table("partition", "dirty ratio", "first dirty offset", "last clean", "uncleanable")
        for p in out["partition_details"]:
            c = p["compaction"]
            cleaning.add_row(
                str(p["partition"]),
                f"{c['dirty_ratio']:.2f}",
                f"{c['first_dirty_offset']:,}",
                format_time(c["last_clean_ms"]) if c["last_clean_ms"] else "never",
                c["uncleanable_reason"] or "-",
            )
        console.print(cleaning)
    configs = Table("config", "value", "source")
    for d in CONFIG_DEFS:
        source = "topic" if d.name in info.overrides else "default"
        configs.add_row(d.name, out["configs"][d.name], source, style=None if source == "topic" else "dim")
    console.print(configs)


def _mirror_json(storage: Storage, info: TopicInfo) -> dict[str, Any] | None:
    """For a followed topic: its source and, per partition, the mirror's lag as its
    status file last said (``None`` where the mirror has not reported the partition)."""
    if info.followed_from is None:
        return None
    status = read_follow_status(storage.path)
    rows = status.for_topic(info.name) if status is not None else {}
    problem = status.problem if status is not None else None
    return {
        "source": info.followed_from,
        "status_updated_ms": status.updated_ms if status is not None else None,
        "state": status.state if status is not None else None,
        "problem": asdict(problem) if problem is not None else None,
        "partitions": [
            {
                "partition": p,
                "source_log_end_offset": rows[p].source_end if p in rows else None,
                "lag_records": rows[p].lag_records if p in rows else None,
                "lag_ms": rows[p].lag_ms if p in rows else None,
                "failed": asdict(failed) if p in rows and (failed := rows[p].failed) is not None else None,
            }
            for p in range(info.partitions)
        ],
    }


def _print_mirror(followed: dict[str, Any]) -> None:
    updated = followed["status_updated_ms"]
    when = format_time(updated) if updated is not None else "never"
    state = followed["state"] or "not reported"
    console.print(f"mirror of {followed['source']} (read-only to clients): {state}; lag as of {when}")
    problem = followed["problem"]
    if problem is not None:
        console.print(
            f"[bold red]{problem['reason']}[/] since {format_time(problem['since_ms'])}: "
            f"{problem['message']}\n  what to do: {problem['action']}",
            highlight=False,
        )
    table = Table("partition", "source log end", "lag (records)", "lag (s)", "stopped")
    failures = []
    for row in followed["partitions"]:
        lag_ms = row["lag_ms"]
        failed = row["failed"]
        table.add_row(
            str(row["partition"]),
            "-" if row["source_log_end_offset"] is None else f"{row['source_log_end_offset']:,}",
            "-" if row["lag_records"] is None else f"{row['lag_records']:,}",
            "-" if lag_ms is None else f"{lag_ms / 1000:.1f}",
            "" if failed is None else failed["reason"],
        )
        if failed is not None:
            failures.append(
                f"partition {row['partition']}: {failed['message']}\n  what to do: {failed['action']}"
            )
    console.print(table)
    for line in failures:
        console.print(line, highlight=False, markup=False)


@topics_app.command("alter")
def alter(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="Set NAME=VALUE (repeatable).")
    ] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option("--delete-config", help="Remove an override, back to the default.")
    ] = None,
    partitions: Annotated[
        int | None, typer.Option("--partitions", "-p", help="Grow to this many partitions.")
    ] = None,
    data: DataOption = DEFAULT_DATA,
    bootstrap: BootstrapOption = None,
) -> None:
    """Change a topic's configs or grow its partition count.

    Example: logtrove topics alter orders --config retention.ms=3600000
    """
    sets = parse_config_pairs(config)
    if not sets and not delete_config and partitions is None:
        fail("nothing to change: give --config, --delete-config or --partitions", 2)
    if bootstrap:
        remote.alter_topic(bootstrap, name, sets, list(delete_config or ()), partitions)
        return
    with open_storage(data, read_only=False) as storage:
        if sets or delete_config:
            storage.alter_topic_configs(name, sets, tuple(delete_config or ()))
        if partitions is not None:
            storage.create_partitions(name, partitions)
    console.print(f"Altered topic [bold]{name}[/].")


@topics_app.command("delete")
def delete(
    name: Annotated[
        str,
        typer.Argument(
            help="Topic name; for an invalid topic also its id or escaped name (see `topics list`)."
        ),
    ],
    data: DataOption = DEFAULT_DATA,
    bootstrap: BootstrapOption = None,
) -> None:
    """Delete a topic and all of its data.

    A topic that `topics list` reports as invalid (e.g. "orders\\n", a name with a
    newline written by an older version) is deleted by its topic id, by its name as
    `topics list` shows it (escaped: orders\\n), or by its exact name ($'orders\\n' in bash).

    Example: logtrove topics delete orders
    """
    if bootstrap:
        remote.delete_topic(bootstrap, name)
        return
    with open_storage(data, read_only=False) as storage:
        storage.delete_topic(name)
    console.print(f"Deleted topic [bold]{escape(escaped_name(name))}[/].")


def _topic_json(info: TopicInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "topic_id": str(info.topic_id),
        "partitions": info.partitions,
        "created_ms": info.created_ms,
        "overrides": dict(info.overrides),
        "configs": info.config.as_strings(),
    }


def _partition_json(storage: Storage, topic: str, partition: int, indexed: int | None) -> dict[str, Any]:
    """One partition of ``topics describe --json``; ``indexed_offset`` is what the
    indexer's checkpoint records (None: no indexer has recorded this partition)."""
    log = storage.log(topic, partition)
    segments = log.segments
    compaction = None
    if log.config.compact:
        status = status_of(storage, log)
        compaction = {
            "dirty_ratio": status.dirty_ratio,
            "first_dirty_offset": status.first_dirty_offset,
            "last_clean_ms": status.last_clean_ms,
            "uncleanable_reason": status.uncleanable_reason,
        }
    return {
        "compaction": compaction,
        "partition": partition,
        "log_start_offset": log.log_start_offset,
        "log_end_offset": log.log_end_offset,
        "indexed_offset": indexed,
        "size_bytes": sum(s.size for s in segments),
        "segments": len(segments),
        "max_timestamp": max((s.max_timestamp for s in segments), default=-1),
    }


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
