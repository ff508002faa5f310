"""Shared pieces of the CLI: the ``--data`` option, opening storage, errors, times.

Every command turns library errors into one red line on stderr and exit code 1 (2 for
usage errors, as typer does), never a traceback.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from logtrove.records import RecordsError
from logtrove.storage import Storage, StorageError
from logtrove.storage.errors import DataDirLockedError

CLIENT_CONFIG_ENV = "LOGTROVE_CLIENT_CONFIG"  # names the TLS / SASL settings file of --bootstrap

console = Console()
err_console = Console(stderr=True)

DEFAULT_DATA = Path("./data")

DataOption = Annotated[
    Path,
    typer.Option("--data", "-d", help="Data directory.", envvar="LOGTROVE_DATA", show_default=True),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


class Isolation(enum.StrEnum):
    """What logtrove's readers show of transactional data (Kafka's isolation levels)."""

    READ_COMMITTED = "read_committed"
    READ_UNCOMMITTED = "read_uncommitted"


IsolationOption = Annotated[
    Isolation,
    typer.Option(
        "--isolation",
        help="read_committed: no records of aborted transactions, nothing past an open one "
        "(Kafka's last stable offset); read_uncommitted: every record. Markers never show.",
        show_default=True,
    ),
]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    """Turn library errors into a clear message and exit code 1."""
    try:
        yield
    except (StorageError, RecordsError, ValueError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))


@contextlib.contextmanager
def open_storage(data: Path, *, read_only: bool, when_locked: str | None = None) -> Iterator[Storage]:
    """Open the data directory for one command, with CLI-style errors. ``when_locked``
    replaces the generic advice when another writer holds the directory."""
    with cli_errors():
        try:
            storage = Storage.open(data, read_only=read_only, holder=" ".join(["logtrove", *sys.argv[1:2]]))
        except DataDirLockedError as exc:
            if when_locked is None:
                raise
            fail(f"data directory {data} is held by {exc.holder}. {when_locked}")
    try:
        with cli_errors():
            yield storage
    finally:
        storage.close()


def format_time(ms: int) -> str:
    """ISO-8601 UTC with milliseconds, for tables."""
    if ms < 0:
        return "-"
    return (
        dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
