"""``logtrove http``: the HTTP API and web console over a data directory, read-only.

It opens the directory read-only, so it runs next to a broker that writes it (the
broker also serves the same app itself unless started with ``--no-http``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from logtrove.cli.common import DEFAULT_DATA, DataOption, cli_errors, err_console, fail, open_storage
from logtrove.cli.main import app


@app.command("http")
def http(
    data: DataOption = DEFAULT_DATA,
    listen: Annotated[
        str, typer.Option("--listen", "-l", help="Address to serve on, HOST:PORT.")
    ] = "127.0.0.1:8080",
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
) -> None:
    """Serve the HTTP API and web console for a data directory (read-only).

    Examples:

      logtrove http --data ./data

      logtrove http --data ./data --listen 127.0.0.1:9000
    """
    from logtrove.http import ListenAddressError, parse_listen, run

    try:
        host, port = parse_listen(listen)
    except ListenAddressError as exc:
        fail(f"--listen: {exc}", 2)
    if log_level.lower() not in ("debug", "info", "warning", "error"):
        fail(f"--log-level must be debug, info, warning or error, got {log_level!r}", 2)
    with open_storage(data, read_only=True) as storage, cli_errors():
        err_console.print(f"logtrove console on http://{host}:{port}/ui/ (API /api/v1, schema /docs)")
        run(storage, f"{host}:{port}", log_level=log_level.lower())
