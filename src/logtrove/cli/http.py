"""``logtrove http``: the HTTP API and web console over a data directory, read-only.

It opens the directory read-only, so it runs next to a broker that writes it (the
broker also serves the same app itself unless started with ``--no-http``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

from logtrove.cli.common import DEFAULT_DATA, DataOption, cli_errors, err_console, fail, open_storage
from logtrove.cli.main import app
from logtrove.storage import AppendResult

if TYPE_CHECKING:
    from logtrove.broker import Broker
    from logtrove.http import HttpServer


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


def check_listen(option: str, text: str) -> str:
    """``text`` if it is a usable HOST:PORT, else a usage error (exit code 2)."""
    from logtrove.http import ListenAddressError, parse_listen

    try:
        host, port = parse_listen(text)
    except ListenAddressError as exc:
        fail(f"{option}: {exc}", 2)
    return f"{host}:{port}"


def start_beside(broker: Broker, listen: str) -> HttpServer | None:
    """Serve the API and console next to a running broker, sharing its storage (for
    ``logtrove serve``; call it on the broker's event loop, e.g. from its ``ready``
    callback). Produce goes through the broker's loop. A port already in use is a
    warning, not a reason to stop the broker."""
    from logtrove.http import next_to_broker, start_in_thread

    loop = asyncio.get_running_loop()

    def append(topic: str, partition: int, batch: bytes) -> AppendResult:
        result = broker.storage.log(topic, partition).append(batch)
        broker.notify_append()
        return result

    try:
        server = start_in_thread(broker.storage, listen, **next_to_broker(loop, append, broker.groups))
    except OSError as exc:
        err_console.print(f"[yellow]warning:[/] no HTTP API: cannot serve on {listen} ({exc})")
        return None
    print(f"logtrove console on {server.url}/ui/ (API /api/v1)", flush=True)
    return server
