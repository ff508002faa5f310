"""``logtrove tokens create|list|revoke``: bearer tokens of the HTTP API, offline.

A token acts as a ``logtrove users`` user on the HTTP API (``--http-auth``). Only its
SHA-256 is stored (:mod:`logtrove.acl.tokens`): ``create`` prints the token once. The
file is edited under its own lock, so these commands work beside a running server, which
honours a revocation from its next request on.
"""

from __future__ import annotations

import datetime
import json
from typing import Annotated

import typer
from rich.table import Table

from logtrove.acl.credentials import CredentialError, CredentialStore, check_user_name
from logtrove.acl.tokens import TokenError, TokenStore
from logtrove.cli.app import app
from logtrove.cli.common import DEFAULT_DATA, DataOption, JsonOption, cli_errors, console, fail
from logtrove.storage.datadir import META_FILE

tokens_app = typer.Typer(help="Create, list and revoke the HTTP API's bearer tokens.", no_args_is_help=True)
app.add_typer(tokens_app, name="tokens")


def _store(data: DataOption) -> TokenStore:
    if not (data / META_FILE).is_file():
        fail(f"{data} is not a logtrove data directory (no {META_FILE})")
    return TokenStore(data)


@tokens_app.command("create")
def create(
    user: Annotated[str, typer.Option("--user", "-u", help="The user the token acts as (User:NAME).")],
    data: DataOption = DEFAULT_DATA,
    description: Annotated[str, typer.Option("--description", help="What the token is for.")] = "",
) -> None:
    """Create a token for a user of `logtrove users` and print it (only this once).

    Example: logtrove tokens create --user alice --data ./data
    """
    try:
        check_user_name(user)
    except CredentialError as exc:
        fail(str(exc), 2)
    store = _store(data)
    with cli_errors():
        if not CredentialStore(data).users().get(user):
            fail(f"no user {user!r}: add it first with `logtrove users add {user}`")
        try:
            info, token = store.create(user, description)
        except TokenError as exc:
            fail(str(exc))
    console.print(f"token {info.id} for User:{user} (shown once, keep it secret):", highlight=False)
    typer.echo(token)


@tokens_app.command("list")
def list_tokens(data: DataOption = DEFAULT_DATA, as_json: JsonOption = False) -> None:
    """The tokens: id, user, creation time and description (never the token)."""
    with cli_errors():
        try:
            tokens = _store(data).tokens()
        except TokenError as exc:
            fail(str(exc))
    if as_json:
        rows = [
            {"id": t.id, "user": t.user, "created_ms": t.created_ms, "description": t.description}
            for t in tokens
        ]
        typer.echo(json.dumps(rows))
        return
    table = Table("id", "user", "created", "description")
    for t in tokens:
        created = datetime.datetime.fromtimestamp(t.created_ms / 1000, datetime.UTC).isoformat(
            timespec="seconds"
        )
        table.add_row(t.id, t.user, created, t.description)
    console.print(table)


@tokens_app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (see `logtrove tokens list`).")],
    data: DataOption = DEFAULT_DATA,
) -> None:
    """Revoke a token: a running HTTP server refuses it from its next request on."""
    with cli_errors():
        try:
            info = _store(data).revoke(token_id)
        except TokenError as exc:
            fail(str(exc))
    console.print(f"token {info.id} of User:{info.user} revoked", highlight=False)
