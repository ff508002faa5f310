"""``logtrove export`` and ``logtrove sql``: the Spark pipelines from the command line.

Both need the ``spark`` extra; without it they say how to install it. pyspark is
imported only inside the commands, so the rest of the CLI starts fast without it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from logtrove.cli.app import app
from logtrove.cli.common import (
    CLIENT_CONFIG_ENV,
    DEFAULT_DATA,
    DataOption,
    Isolation,
    IsolationOption,
    JsonOption,
    cli_errors,
    console,
    err_console,
    fail,
)
from logtrove.clock import parse_time

BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap",
        "-b",
        help="Read through a running broker (host:port) instead of the data dir "
        f"(TLS / SASL: a librdkafka-style properties file named by {CLIENT_CONFIG_ENV}).",
    ),
]


def _need_pyspark() -> None:
    from logtrove.spark import INSTALL_HINT, SparkNotInstalledError, require_pyspark

    try:
        require_pyspark()
    except SparkNotInstalledError:
        fail(escape(INSTALL_HINT))


@contextmanager
def _spark_session(name: str, *, full_jit: bool = False) -> Iterator[Any]:
    _need_pyspark()
    from pyspark.sql import SparkSession

    from logtrove.spark import register
    from logtrove.spark.session import local_session

    active = SparkSession.getActiveSession()  # embedded use (tests, notebooks): borrow it
    if active is not None:
        register(active)
        yield active
        return
    with err_console.status("Starting Spark (a local JVM, 10-30 s)…"):  # shown on a terminal only
        spark = local_session(name, full_jit=full_jit)
    try:
        yield spark
    finally:
        spark.stop()


# The line a Python traceback ends with: "module.SomeError: why".
_PYTHON_ERROR = re.compile(r"(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*): (.+)")


def spark_error_line(message: str) -> str:
    """One line for a Spark error: the Python error a data source raised inside it (its
    class without the module, and its message) when there is one, else the first line."""
    lines = message.splitlines()
    starts = [i for i, line in enumerate(lines) if line.endswith("Traceback (most recent call last):")]
    for line in lines[starts[-1] + 1 :] if starts else []:
        found = None if line[:1].isspace() else _PYTHON_ERROR.fullmatch(line.strip())
        if found:
            return f"{found[1]}: {found[2].removesuffix('SQLSTATE: 38000').strip()}"
    return lines[0] if lines else message


@contextmanager
def _spark_errors() -> Iterator[None]:
    """Spark errors (bad SQL, unknown columns, a data source's error) as one red line;
    call after require_pyspark."""
    from pyspark.errors import PySparkException

    try:
        yield
    except PySparkException as exc:
        fail(escape(spark_error_line(str(exc)) or type(exc).__name__))


@app.command("export")
def export(
    topic: Annotated[str, typer.Argument(help="The topic to export.")],
    to: Annotated[Path, typer.Option("--to", help="Directory of the Parquet table (created if missing).")],
    parse: Annotated[
        str, typer.Option("--parse", help="How to read values: json, combined-log (nginx/Apache) or raw.")
    ] = "raw",
    schema: Annotated[
        str | None,
        typer.Option("--schema", help="JSON schema as Spark DDL, e.g. 'n INT, text STRING' (else inferred)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="First run starts at this time (ms or ISO-8601); later runs continue."),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Skip records stamped at or after this time.")
    ] = None,
    stream: Annotated[
        bool, typer.Option("--stream", help="Keep exporting new records until interrupted.")
    ] = False,
    trigger_seconds: Annotated[
        float, typer.Option("--every", help="With --stream: seconds between runs.")
    ] = 10.0,
    isolation: IsolationOption = Isolation.READ_COMMITTED,
    data: DataOption = DEFAULT_DATA,
    bootstrap: BootstrapOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export a topic to a Parquet table partitioned by date and hour, exactly once.
    Committed data only unless --isolation read_uncommitted.

    Each run continues where the last one committed (a checkpoint inside the table
    directory), so rerunning adds only new records.

    Examples:

      logtrove export access_log --to ./tables/access --parse combined-log

      logtrove export orders --to ./tables/orders --parse json --since 2026-11-22T00:00:00Z
    """
    from logtrove.spark.parse import PARSERS

    if parse not in PARSERS:
        fail(f"--parse must be one of {', '.join(PARSERS)}, not {parse!r}", code=2)
    _need_pyspark()
    from logtrove.spark.export import ExportSpec, check_source, export_topic, table_rows

    with cli_errors():
        since_ms = parse_time(since) if since else None
        until_ms = parse_time(until) if until else None
        spec = ExportSpec(
            topic,
            to,
            path=None if bootstrap else str(data),
            bootstrap=bootstrap,
            parse=parse,
            json_schema=schema,
            since=since_ms,
            until=until_ms,
            stream=stream,
            trigger_seconds=trigger_seconds,
            read_committed=isolation is Isolation.READ_COMMITTED,
            client_config=os.environ.get(CLIENT_CONFIG_ENV),
        )
        check_source(spec)  # no such topic: one line, before a JVM starts
    with _spark_session("logtrove-export", full_jit=True) as spark, cli_errors(), _spark_errors():
        with err_console.status(f"Exporting {topic}…") as status:  # shown on a terminal only
            result = export_topic(spark, spec, lambda line: status.update(f"Exporting {topic}: {line}"))
        total = table_rows(spark, to)
    if as_json:
        console.print_json(
            json.dumps(
                {"topic": topic, "table": str(to), "rows_added": result.rows_added, "rows_total": total}
            )
        )
    else:
        console.print(f"exported {result.rows_added} new records of {topic} to {to} ({total} in the table)")


def _parse_tables(specs: list[str]) -> dict[str, Path]:
    tables: dict[str, Path] = {}
    for spec in specs:
        name, sep, where = spec.partition("=")
        path = Path(where) if sep else Path(spec)
        tables[name if sep else path.name] = path
    return tables


def _cell(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


@app.command("sql")
def sql(
    query: Annotated[str, typer.Argument(help="A Spark SQL query over topics (as views) and tables.")],
    table: Annotated[
        list[str] | None,
        typer.Option(
            "--table",
            "-t",
            help="An exported Parquet table as NAME=DIR (or DIR: named after it). Repeatable.",
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many rows.")] = 1000,
    data: DataOption = DEFAULT_DATA,
    bootstrap: BootstrapOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run Spark SQL over topics and exported tables.

    Every topic is a view named after it ('-' and '.' become '_'), with the columns of
    Spark's Kafka source plus id and tag.

    Examples:

      logtrove sql "SELECT tag, count(*) FROM orders GROUP BY tag"

      logtrove sql "SELECT status, count(*) FROM access GROUP BY status" --table access=./tables/access
    """
    with cli_errors():
        tables = _parse_tables(table or [])
    with _spark_session("logtrove-sql") as spark, cli_errors(), _spark_errors():
        from logtrove.spark.sql import register_tables, register_topics, run_sql

        register_topics(
            spark,
            path=None if bootstrap else str(data),
            bootstrap=bootstrap,
            client_config=os.environ.get(CLIENT_CONFIG_ENV),
        )
        register_tables(spark, tables)
        columns, rows = run_sql(spark, query, limit)
    if as_json:
        for row in rows:
            typer.echo(json.dumps({c: _cell(v) for c, v in zip(columns, row, strict=True)}, default=str))
        return
    out = Table(*columns, show_lines=False)
    for row in rows:
        out.add_row(*("NULL" if v is None else str(_cell(v)) for v in row))
    console.print(out)
    console.print(f"{len(rows)} row(s)", style="dim")
