"""``logtrove http``: the HTTP API and web console over a data directory, read-only.

It opens the directory read-only, so it runs next to a broker that writes it (the
broker also serves the same app itself unless started with ``--no-http``).
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Annotated, Any

import typer

from logtrove.cli.common import DEFAULT_DATA, DataOption, cli_errors, err_console, fail, open_storage
from logtrove.cli.main import app
from logtrove.storage import AppendResult

# = logtrove.http.limits.DEFAULT_MAX_BODY_BYTES, not imported here: the CLI starts without FastAPI
DEFAULT_MAX_BODY_BYTES = 16 << 20

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
    max_body_mb: Annotated[int, body_limit_option()] = DEFAULT_MAX_BODY_BYTES >> 20,
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
        run(storage, f"{host}:{port}", log_level=log_level.lower(), max_body_bytes=max_body_mb << 20)


def check_listen(option: str, text: str) -> str:
    """``text`` if it is a usable HOST:PORT, else a usage error (exit code 2)."""
    from logtrove.http import ListenAddressError, parse_listen

    try:
        host, port = parse_listen(text)
    except ListenAddressError as exc:
        fail(f"{option}: {exc}", 2)
    return f"{host}:{port}"


class HttpBeside:
    """The HTTP API and console next to a running broker, sharing its storage (for
    ``logtrove serve``). Created on the broker's event loop (from its ``ready`` callback);
    the server starts in a thread of its own so the loop keeps serving Kafka clients
    meanwhile. Produce goes through the broker's loop. A port already in use is a
    warning, not a reason to stop the broker."""

    def __init__(
        self,
        broker: Broker,
        listen: str,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        lag_sample_s: float | None = None,
    ) -> None:
        self.broker = broker
        self.listen = listen
        self.max_body_bytes = max_body_bytes
        self.lag_sample_s = lag_sample_s
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._server: HttpServer | None = None
        self._stopping = False
        self._starter = threading.Thread(target=self._start, name="http-start", daemon=True)
        self._starter.start()

    async def _append(self, topic: str, partition: int, batch: bytes) -> AppendResult:
        from logtrove.broker.produce import append_durably

        return await append_durably(self.broker, topic, partition, batch)

    def _start(self) -> None:
        from logtrove.http import next_to_broker, start_in_thread

        options = next_to_broker(self._loop, self._append, self.broker.groups)
        try:
            server = start_in_thread(
                self.broker.storage,
                self.listen,
                max_body_bytes=self.max_body_bytes,
                lag_sample_interval_s=self.lag_sample_s,
                **options,
            )
        except OSError as exc:
            err_console.print(f"[yellow]warning:[/] no HTTP API: cannot serve on {self.listen} ({exc})")
            return
        with self._lock:
            if self._stopping:
                server.stop()
                return
            self._server = server
        print(f"logtrove console on {server.url}/ui/ (API /api/v1)", flush=True)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            server = self._server
        if server is not None:
            server.stop()
        self._starter.join(30)


def start_beside(
    broker: Broker,
    listen: str,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    lag_sample_s: float | None = None,
) -> HttpBeside:
    """Start serving the API next to ``broker`` (see :class:`HttpBeside`); with
    ``lag_sample_s`` it samples every group's lag for the console's lag charts."""
    return HttpBeside(broker, listen, max_body_bytes=max_body_bytes, lag_sample_s=lag_sample_s)


def body_limit_option() -> Any:
    """``--http-max-body-mb``, shared by ``serve`` and ``http``."""
    return typer.Option(
        "--http-max-body-mb",
        min=1,
        max=1024,
        help="Largest HTTP request body, MiB; larger ones get 413 while they are read.",
    )
