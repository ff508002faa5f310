"""``logtrove users add|delete|list``: the SASL users of a data directory, offline.

The credentials file (:mod:`logtrove.acl.credentials`) is edited under its own lock,
not the data directory's writer lock, so these commands work with or without a broker
running on the directory; a running broker uses the new credentials from the next
authentication on. Passwords are read from a prompt (twice, not echoed) or, with
``--password-stdin``, from the first line of standard input; they are never arguments
(which ``ps`` would show).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from logtrove.acl.credentials import (
    DEFAULT_ITERATIONS,
    SCRAM_MECHANISMS,
    CredentialError,
    CredentialStore,
    ScramCredential,
    Users,
    check_iterations,
    check_user_name,
)
from logtrove.cli.app import app
from logtrove.cli.common import DEFAULT_DATA, DataOption, JsonOption, cli_errors, console, fail
from logtrove.storage.datadir import META_FILE, DataDir

users_app = typer.Typer(
    help="Add, delete and list the SASL/SCRAM users of a data directory.", no_args_is_help=True
)
app.add_typer(users_app, name="users")

MechanismOption = Annotated[
    list[str] | None,
    typer.Option("--mechanism", "-m", help="SCRAM-SHA-256 or SCRAM-SHA-512; repeatable (default: both)."),
]


def _store(data: Path, *, create: bool) -> CredentialStore:
    """The credentials of ``data``; ``create`` makes it a data directory if it is not one."""
    if not (data / META_FILE).is_file():
        if not create:
            fail(f"{data} is not a logtrove data directory (no {META_FILE})")
        with cli_errors():
            DataDir.open(data, holder="logtrove users").close()
    return CredentialStore(data)


def _mechanisms(given: list[str] | None) -> list[str]:
    names = [m.upper() for m in given] if given else list(SCRAM_MECHANISMS)
    for name in names:
        if name not in SCRAM_MECHANISMS:
            fail(f"unknown mechanism {name!r} (one of {', '.join(SCRAM_MECHANISMS)})", 2)
    return names


def _password(from_stdin: bool) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        fail("the password must not be empty", 2)
    return password


@users_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="User name (the principal is User:NAME).")],
    data: DataOption = DEFAULT_DATA,
    mechanism: MechanismOption = None,
    iterations: Annotated[
        int, typer.Option("--iterations", help="PBKDF2 iterations of the SCRAM credential (4096..16384).")
    ] = DEFAULT_ITERATIONS,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from the first line of stdin.")
    ] = False,
) -> None:
    """Add a user, or set a user's password (salted SCRAM credentials only are stored).

    Example: echo 's3cret' | logtrove users add alice --password-stdin --data ./data
    """
    mechanisms = _mechanisms(mechanism)
    try:
        check_user_name(name)
        check_iterations(iterations)
    except CredentialError as exc:
        fail(str(exc), 2)
    store = _store(data, create=True)
    password = _password(password_stdin)
    creds = {m: ScramCredential.from_password(m, password, iterations) for m in mechanisms}

    def change(users: Users) -> None:
        users.setdefault(name, {}).update(creds)

    with cli_errors():
        store.update(change)
    console.print(f"user {name}: {', '.join(mechanisms)} set", highlight=False)


@users_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="User name.")],
    data: DataOption = DEFAULT_DATA,
    mechanism: MechanismOption = None,
) -> None:
    """Delete a user's credentials (those of --mechanism only, if given)."""
    mechanisms = _mechanisms(mechanism)
    store = _store(data, create=False)
    found: list[str] = []

    def change(users: Users) -> None:
        creds = users.get(name, {})
        found.extend(m for m in mechanisms if creds.pop(m, None) is not None)

    with cli_errors():
        store.update(change)
    if not found:
        fail(f"user {name} has no {' or '.join(mechanisms)} credential")
    console.print(f"user {name}: {', '.join(found)} deleted", highlight=False)


@users_app.command("list")
def list_users(data: DataOption = DEFAULT_DATA, as_json: JsonOption = False) -> None:
    """The users, their mechanisms and iterations (never a key or salt)."""
    with cli_errors():
        users = _store(data, create=False).users()
    rows = [
        (name, {m: c.iterations for m, c in sorted(creds.items())}) for name, creds in sorted(users.items())
    ]
    if as_json:
        typer.echo(json.dumps([{"user": name, "mechanisms": mechs} for name, mechs in rows]))
        return
    table = Table("user", "mechanisms (iterations)")
    for name, mechs in rows:
        table.add_row(name, ", ".join(f"{m} ({i})" for m, i in mechs.items()))
    console.print(table)
