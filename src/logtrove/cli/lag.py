"""``logtrove lag [GROUP]``: consumer lag per group × topic × partition.

On a data directory (read-only, so it works while the broker runs) lag is computed by
:class:`~logtrove.groups.lag.LagMonitor`; with ``--bootstrap`` it is asked of the broker
over the Kafka protocol (:mod:`logtrove.client.lag`), and tag-aware lag is counted next to the
data: from the data directory when it is on this machine and belongs to that broker (and
``--http`` is not given), else by the broker's HTTP API (:mod:`logtrove.client.http`; ``--http``,
default the broker host on port 8080). When neither can count, tag lag is left out
(``null``) with a warning.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group as RichGroup
from rich.live import Live
from rich.table import Table
from rich.text import Text

from logtrove.cli.app import app
from logtrove.cli.common import (
    DEFAULT_DATA,
    DataOption,
    Isolation,
    IsolationOption,
    JsonOption,
    cli_errors,
    console,
    err_console,
    fail,
    format_time,
)
from logtrove.cli.remote import BootstrapOption, HttpOption, connect
from logtrove.client import (
    HttpApi,
    HttpTagCounter,
    KafkaClient,
    StorageTagCounter,
    TagCounter,
    cluster_id,
    http_url,
    open_brokers_data,
    remote_lag,
)
from logtrove.groups.lag import GroupLag, LagMonitor, PartitionLag, TopicLag
from logtrove.storage import Storage


def _ms(value: int | None) -> str:
    if value is None:
        return "-"
    if value < 1000:
        return f"{value} ms"
    seconds = value / 1000
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _partition_cells(row: PartitionLag) -> list[str | Text]:
    if row.never_committed:
        return [str(row.partition), _n(row.log_end_offset), Text("never committed", style="yellow"), "-", "-"]
    return [
        str(row.partition),
        _n(row.log_end_offset),
        _n(row.committed_offset),
        Text(_n(row.lag), style="bold red" if row.lag else "green"),
        _ms(row.time_lag_ms),
    ]


def render(groups: list[GroupLag]) -> RichGroup | Text:
    """Per group a summary line, then per topic a table: a row per partition and a total."""
    if not groups:
        return Text("no consumer groups", style="dim")
    parts: list[Table | Text] = []
    for g in groups:
        line = f"[bold]{g.group}[/]  lag {g.lag:,}  time lag {_ms(g.time_lag_ms)}"
        if g.tag_lag is not None:
            line += f"  tag lag {g.tag_lag:,}"
        if g.never_committed:
            line += f"  [yellow]{g.never_committed} partition(s) never committed[/]"
        parts.append(Text.from_markup(line))
        if not g.topics:
            parts.append(Text("  no commits", style="dim"))
        for t in g.topics:
            parts.append(_topic_table(t))
    return RichGroup(*parts)


def _topic_table(t: TopicLag) -> Table:
    tagged = t.tags is not None
    title = f"{t.topic}" + (f"  tags: {t.tags}" if tagged else "")
    table = Table(title=title, title_justify="left", title_style="bold")
    for column in ("partition", "log end", "committed", "lag", "time lag"):
        table.add_column(column, justify="right", no_wrap=True)
    if tagged:
        for column in ("tag lag", "tag age"):
            table.add_column(column, justify="right", no_wrap=True)
    for row in t.partitions:
        cells = _partition_cells(row)
        if tagged:
            cells += [_n(row.tag_lag), _ms(row.tag_time_lag_ms)]
        table.add_row(*cells)
    total: list[str | Text] = ["total", "", "", Text(_n(t.lag), style="bold"), _ms(t.time_lag_ms)]
    if tagged:
        total += [Text(_n(t.tag_lag), style="bold"), _ms(t.tag_time_lag_ms)]
    table.add_row(*total, style="bold", end_section=True)
    return table


class _Source:
    """Where the lag comes from: the data directory, or a broker (plus, for tag counts,
    its data directory when it is here, else its HTTP API)."""

    def __init__(
        self, data: Path, bootstrap: str | None, http: str | None, *, read_committed: bool = True
    ) -> None:
        self.read_committed = read_committed
        self.data = data
        self.bootstrap = bootstrap
        self.http = http
        self.storage: Storage | None = None
        self.monitor: LagMonitor | None = None
        self.counter: TagCounter | None = None
        self._warned: set[str] = set()
        if bootstrap is None:
            with cli_errors():
                self.storage = Storage.open(data, read_only=True)
            self.monitor = LagMonitor(self.storage, read_committed=read_committed)

    def lag(self, client: KafkaClient | None, group: str | None, topic: str | None) -> list[GroupLag]:
        if self.monitor is not None:
            self.monitor.refresh()
            with cli_errors():
                return self.monitor.lag(group, topic)
        assert client is not None and self.bootstrap is not None
        if self.counter is None:
            self.counter = self._counter(client, self.bootstrap)
        if self.storage is not None and isinstance(self.counter, StorageTagCounter):
            self.storage.refresh()
        found = remote_lag(client, group, topic, counter=self.counter, read_committed=self.read_committed)
        if isinstance(self.counter, HttpTagCounter):
            failure = self.counter.take_failure()
            if failure is not None and str(failure) not in self._warned:
                self._warned.add(str(failure))
                err_console.print(f"[yellow]warning:[/] no tag-aware lag: {failure}", highlight=False)
        return found

    def _counter(self, client: KafkaClient, bootstrap: str) -> TagCounter:
        """The data directory's counter if it is this broker's, else the HTTP API's."""
        cluster = cluster_id(client)
        if self.http is None:
            with cli_errors():
                self.storage = open_brokers_data(self.data, cluster)
        if self.storage is not None:
            return StorageTagCounter(self.storage, read_committed=self.read_committed)
        api = HttpApi(http_url(bootstrap, self.http), cluster_id=cluster)
        return HttpTagCounter(api, read_committed=self.read_committed)

    def close(self) -> None:
        if self.storage is not None:
            self.storage.close()


@app.command()
def lag(
    group: Annotated[str | None, typer.Argument(help="Only this group (default: every group).")] = None,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Only this topic.")] = None,
    data: DataOption = DEFAULT_DATA,
    bootstrap: BootstrapOption = None,
    http: HttpOption = None,
    as_json: JsonOption = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C.")] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.1, help="Seconds between refreshes with --watch.")
    ] = 2.0,
    isolation: IsolationOption = Isolation.READ_COMMITTED,
) -> None:
    """Consumer lag per group, topic and partition: log end, committed offset, lag in
    messages and in time, and for groups with a tag subscription the exact number of
    unconsumed records that match it. Partitions a group never committed on are shown
    as such, not as 0. By default the lag is that of a read_committed consumer: measured
    to the last stable offset (an open transaction's records are not yet consumable),
    aborted records left out of tag counts; --isolation read_uncommitted measures to
    the log end. With --bootstrap, the broker is asked; tag counts then come from
    its HTTP API (--http) unless its data directory is on this machine.

    Examples:

      logtrove lag                       every group, from ./data (read-only)

      logtrove lag billing --json

      logtrove lag billing --watch --bootstrap 127.0.0.1:9092

      logtrove lag billing --json -b broker:9092 --http http://broker:8080
    """
    source = _Source(data, bootstrap, http, read_committed=isolation is Isolation.READ_COMMITTED)
    try:
        if bootstrap is None:
            _run(source, None, group, topic, as_json, watch, interval)
        else:
            with connect(bootstrap) as client:
                _run(source, client, group, topic, as_json, watch, interval)
    finally:
        source.close()


def _run(
    source: _Source,
    client: KafkaClient | None,
    group: str | None,
    topic: str | None,
    as_json: bool,
    watch: bool,
    interval: float,
) -> None:
    groups = source.lag(client, group, topic)
    if group is not None and not groups[0].topics and not watch:
        fail(
            f"group {group!r} has no committed offsets or tag subscriptions"
            + (f" on {topic!r}" if topic else "")
        )
    if not watch:
        _print(groups, as_json)
        return
    try:
        if as_json or not console.is_terminal:  # piped: one line per sample, as it is taken
            while True:
                typer.echo(json.dumps([g.to_json() for g in groups]) if as_json else sample_line(groups))
                time.sleep(interval)
                groups = source.lag(client, group, topic)
        with Live(render(groups), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                groups = source.lag(client, group, topic)
                live.update(render(groups), refresh=True)
    except KeyboardInterrupt:
        return


def sample_line(groups: list[GroupLag], now_ms: int | None = None) -> str:
    """One line for one sample of ``lag --watch`` when the output is not a terminal:
    ``TIME  group: lag N (age), tag lag M; other: …``."""
    parts = []
    for g in groups:
        age = "-" if g.time_lag_ms is None else f"{g.time_lag_ms} ms"
        tags = "" if g.tag_lag is None else f", tag lag {g.tag_lag}"
        parts.append(f"{g.group}: lag {g.lag} ({age}){tags}")
    when = format_time(time.time_ns() // 1_000_000 if now_ms is None else now_ms)
    return f"{when}  " + ("; ".join(parts) if parts else "no groups")


def _print(groups: list[GroupLag], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([g.to_json() for g in groups]))
    else:
        console.print(render(groups))
