"""``logtrove groups …``: list consumer groups, and declare their tag subscriptions.

A subscription is written by whoever holds the data directory: this command itself when
no broker runs (it takes the writer lock), or the broker, through ``--bootstrap`` (the
record is produced to ``__consumer_offsets``, see :mod:`logtrove.groups.subscriptions`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from logtrove.cli.app import app
from logtrove.cli.common import DEFAULT_DATA, DataOption, JsonOption, console, fail, format_time, open_storage
from logtrove.cli.remote import BootstrapOption, connect
from logtrove.client import groups as remote_groups
from logtrove.groups.consumer_state import STATE_FILE, load_groups
from logtrove.groups.progress import GroupProgress
from logtrove.groups.subscriptions import append_subscription
from logtrove.groups.tags import InvalidTagExpressionError, TagFilter

CLASSIC, CONSUMER = "classic", "consumer"  # the protocol of a group (KIP-848's is "consumer")

groups_app = typer.Typer(
    help="List consumer groups and manage their tag subscriptions.", no_args_is_help=True
)
app.add_typer(groups_app, name="groups")


@groups_app.command("list")
def list_groups(
    data: DataOption = DEFAULT_DATA,
    bootstrap: BootstrapOption = None,
    as_json: JsonOption = False,
) -> None:
    """Groups with committed offsets or tag subscriptions (and, through a broker, the
    live ones with their state), each with its protocol: classic or consumer (KIP-848).

    Example: logtrove groups list --json
    """
    rows: list[dict[str, Any]] = []
    if bootstrap:
        with connect(bootstrap) as client:
            listed = remote_groups.list_groups(client)
            live = {g["group"]: g["state"] for g in listed}
            types = {g["group"]: g["type"] for g in listed}
            subs = remote_groups.subscriptions(client)
            for name in sorted(set(live) | {k.group for k in subs}):
                topics = sorted({t for t, _ in remote_groups.committed(client, name)})
                mine = {k.topic: v.expression for k, v in subs.items() if k.group == name}
                rows.append(
                    {
                        "group": name,
                        "type": types.get(name, CLASSIC),
                        "state": live.get(name, "Empty"),
                        "topics": topics,
                        "subscriptions": mine,
                    }
                )
    else:
        with open_storage(data, read_only=True) as storage:
            progress = GroupProgress(storage)
            progress.refresh()
            consumer = load_groups(storage.path / STATE_FILE)
            for name in sorted(set(progress.groups()) | set(consumer)):
                commits = progress.committed(name)
                rows.append(
                    {
                        "group": name,
                        "type": CONSUMER if name in consumer else CLASSIC,
                        "topics": sorted({t for t, _ in commits}),
                        "committed_partitions": len(commits),
                        "last_commit": max((c.commit_timestamp for c in commits.values()), default=None),
                        "subscriptions": {
                            t: s.expression for t, s in progress.subscriptions_of(name).items()
                        },
                    }
                )
    if as_json:
        typer.echo(json.dumps(rows))
        return
    if not rows:
        console.print("[dim]no consumer groups[/]")
        return
    table = Table("group", "type", "state" if bootstrap else "last commit", "topics", "tag subscriptions")
    for row in rows:
        second = row["state"] if bootstrap else format_time(row["last_commit"] if row["last_commit"] else -1)
        subs_text = ", ".join(f"{t}: {e}" for t, e in sorted(row["subscriptions"].items()))
        table.add_row(row["group"], row["type"], second, ", ".join(row["topics"]), subs_text)
    console.print(table)


@groups_app.command("subscribe")
def subscribe(
    group: Annotated[str, typer.Argument(help="Consumer group ID.")],
    topic: Annotated[str, typer.Argument(help="Topic.")],
    tags: Annotated[str, typer.Option("--tags", help="'TagA || TagB', or '*' for every record.")],
    data: DataOption = DEFAULT_DATA,
    bootstrap: BootstrapOption = None,
) -> None:
    """Declare which tags GROUP consumes on TOPIC, so that its lag also counts, exactly,
    the unconsumed records that match (from .tagidx).

    Examples:

      logtrove groups subscribe billing orders --tags 'TagA || TagB'

      logtrove groups subscribe billing orders --tags '*' --bootstrap 127.0.0.1:9092
    """
    try:
        canonical = str(TagFilter.parse(tags))
    except InvalidTagExpressionError as exc:
        fail(str(exc), 2)
    _write(group, topic, canonical, data, bootstrap)
    console.print(f"Group [bold]{group}[/] now consumes [bold]{canonical}[/] on [bold]{topic}[/].")


@groups_app.command("unsubscribe")
def unsubscribe(
    group: Annotated[str, typer.Argument(help="Consumer group ID.")],
    topic: Annotated[str, typer.Argument(help="Topic.")],
    data: DataOption = DEFAULT_DATA,
    bootstrap: BootstrapOption = None,
) -> None:
    """Remove GROUP's tag subscription on TOPIC (its lag is then counted for every tag)."""
    _write(group, topic, None, data, bootstrap)
    console.print(f"Group [bold]{group}[/] has no tag subscription on [bold]{topic}[/] any more.")


def _write(group: str, topic: str, expression: str | None, data: DataOption, bootstrap: str | None) -> None:
    if not group:
        fail("a group ID cannot be empty", 2)
    if bootstrap:
        with connect(bootstrap) as client:
            remote_groups.subscribe(client, group, topic, expression)
        return
    with open_storage(data, read_only=False) as storage:
        append_subscription(storage, group, topic, expression)
