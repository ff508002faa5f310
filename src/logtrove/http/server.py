"""Serving the app with uvicorn: in the foreground (``logtrove http``) or in a thread next
to the broker (``logtrove serve``, see :func:`next_to_broker`)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

import uvicorn
from fastapi import FastAPI

from logtrove.clock import ascii_int
from logtrove.groups import ConsumerGroups, GroupCoordinator
from logtrove.http.app import close as close_app
from logtrove.http.app import create_app
from logtrove.http.groups import GroupState
from logtrove.http.problems import Problem
from logtrove.http.tail import TailHub
from logtrove.storage import AppendResult, Storage

MAX_REQUEST_HEAD = 1 << 20


class ListenAddressError(ValueError):
    """A ``HOST:PORT`` that cannot be used."""


def parse_listen(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``"127.0.0.1:8080"`` → ``("127.0.0.1", 8080)``; ``":8080"`` uses ``default_host``."""
    host, sep, port = text.strip().rpartition(":")
    number = ascii_int(port)
    if not sep or number is None or not 0 <= number <= 65535:
        raise ListenAddressError(f"expected HOST:PORT such as 127.0.0.1:8080, got {text!r}")
    return (host.strip("[]") or default_host), number


class _Server(uvicorn.Server):
    """uvicorn's server, except that after a SIGINT/SIGTERM shutdown it returns instead of
    re-raising the signal, so the caller still closes its storage and exits with 0."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End the app's live tails first (uvicorn waits for open responses to finish, and
        an event stream never would) and its lag sampler."""
        app = self.config.app
        if isinstance(app, FastAPI) and isinstance(getattr(app.state, "tails", None), TailHub):
            close_app(app)
        await super().shutdown(sockets)


@dataclass(frozen=True)
class HttpTls:
    """The HTTPS certificate (chain) and key of the server, PEM files."""

    certfile: str
    keyfile: str | None = None


def _config(app: Any, host: str, port: int, log_level: str, tls: HttpTls | None = None) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        server_header=False,
        # a request line of long (percent-encoded) search parameters stays well under this
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
        ssl_certfile=None if tls is None else tls.certfile,
        ssl_keyfile=None if tls is None else tls.keyfile,
    )


def run(
    storage: Storage, listen: str, *, log_level: str = "info", tls: HttpTls | None = None, **app_options: Any
) -> None:
    """Serve the API and console on ``listen`` (HTTPS with ``tls``) until SIGINT or SIGTERM."""
    host, port = parse_listen(listen)
    _Server(_config(create_app(storage, listen_host=host, **app_options), host, port, log_level, tls)).run()


@dataclass
class HttpServer:
    """A server running in a background thread; :meth:`stop` ends it."""

    server: uvicorn.Server
    thread: threading.Thread

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        servers = getattr(self.server, "servers", [])
        for srv in servers:
            for sock in srv.sockets:
                return int(sock.getsockname()[1])
        return int(self.server.config.port)

    @property
    def url(self) -> str:
        scheme = "https" if self.server.config.ssl_certfile else "http"
        return f"{scheme}://{self.server.config.host}:{self.port}"

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)


def start_in_thread(
    storage: Storage,
    listen: str,
    *,
    log_level: str = "warning",
    startup_timeout_s: float = 15.0,
    tls: HttpTls | None = None,
    **app_options: Any,
) -> HttpServer:
    """Start the API on ``listen`` in a daemon thread and return once it accepts
    connections. ``app_options`` go to :func:`create_app` (``appender``, ``group_states``…).
    Raises :class:`OSError` when the address cannot be bound."""
    host, port = parse_listen(listen)
    server = _Server(
        _config(create_app(storage, listen_host=host, **app_options), host, port, log_level, tls)
    )
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            server.run()
        except BaseException as exc:  # reported to the caller below
            failure.append(exc)

    thread = threading.Thread(target=serve, name=f"http-{listen}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(5)
            if failure and not isinstance(failure[0], SystemExit):
                raise failure[0]
            raise OSError(f"the HTTP server could not start on {listen}")
        time.sleep(0.02)
    return HttpServer(server, thread)


# -- next to a broker ----------------------------------------------------------------------
T = TypeVar("T")
_LOOP_TIMEOUT_S = 30.0


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``fn()`` on ``loop`` and wait for it (a 503 problem once the
    loop is gone or does not answer in time)."""
    if loop.is_closed() or not loop.is_running():
        raise Problem(503, "shutting-down", "Shutting down", "the broker is shutting down")

    async def call() -> T:
        return await fn()

    try:
        return asyncio.run_coroutine_threadsafe(call(), loop).result(_LOOP_TIMEOUT_S)
    except TimeoutError:
        raise Problem(503, "busy", "Broker busy", "the broker did not answer in time") from None


def next_to_broker(
    loop: asyncio.AbstractEventLoop,
    append: Callable[[str, int, bytes], Awaitable[AppendResult]],
    coordinator: GroupCoordinator | None = None,
    consumer_groups: ConsumerGroups | None = None,
) -> dict[str, Any]:
    """:func:`create_app` options for an app that shares a broker's storage.

    The broker's event loop is its single writer, so REST produce runs ``append`` (a
    coroutine that appends, wakes waiting fetches and, where the topic asks for it, waits
    for the fsync) on ``loop``; live group states are read there too, since the
    coordinator is not thread-safe.
    """

    def appender(topic: str, partition: int, batch: bytes) -> AppendResult:
        return _on_loop(loop, lambda: append(topic, partition, batch))

    def states() -> dict[str, GroupState]:
        if coordinator is None:
            return {}

        async def read() -> dict[str, GroupState]:
            return _group_states(coordinator, consumer_groups)

        return _on_loop(loop, read)

    options: dict[str, Any] = {"appender": appender}
    if coordinator is not None:
        options["group_states"] = states
    return options


def _group_states(
    coordinator: GroupCoordinator, consumer_groups: ConsumerGroups | None
) -> dict[str, GroupState]:
    """Live states of the groups of both protocols (a consumer-protocol group's commits
    also make the classic coordinator list it: its own state wins)."""
    out = {}
    for listed in coordinator.list_groups():
        described = coordinator.describe(listed["group_id"])
        members = tuple(
            {"member_id": m["member_id"], "client_id": m["client_id"], "client_host": m["client_host"]}
            for m in described.get("members", [])
        )
        out[listed["group_id"]] = GroupState(str(described["group_state"]), len(members), members)
    for group in (consumer_groups.groups if consumer_groups is not None else {}).values():
        members = tuple(
            {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host}
            for m in group.members.values()
        )
        out[group.group_id] = GroupState(group.state, len(members), members, type="consumer")
    return out
