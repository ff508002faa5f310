"""``logtrove http``: the HTTP API and web console over a data directory, read-only.

It opens the directory read-only, so it runs next to a broker that writes it (the
broker also serves the same app itself unless started with ``--no-http``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from logtrove.cli.app import app
from logtrove.cli.common import DEFAULT_DATA, DataOption, cli_errors, err_console, fail, open_storage
from logtrove.storage import AppendResult

# = logtrove.http.limits.DEFAULT_MAX_BODY_BYTES, not imported here: the CLI starts without FastAPI
DEFAULT_MAX_BODY_BYTES = 16 << 20

if TYPE_CHECKING:
    from logtrove.acl import Authorizer
    from logtrove.broker import Broker
    from logtrove.http import HttpSecurity, HttpServer, HttpTls


@dataclass(frozen=True)
class HttpSecurityOptions:
    """The HTTP API's security options, shared by ``serve`` and ``http`` (all off by
    default, so that ``make run`` needs no set-up)."""

    auth: bool = False
    basic_without_tls: bool = False
    certfile: Path | None = None
    keyfile: Path | None = None
    metrics_auth: bool = False
    allowed_hosts: tuple[str, ...] = ()  # --http-allowed-host, and serve's --advertise hosts

    def check(self, host: str) -> HttpSecurityOptions:
        """Exit with a usage error on settings that do not go together."""
        from logtrove.http.origin import HostNameError, normalize_host
        from logtrove.http.security import is_loopback

        for name in self.allowed_hosts:
            try:
                normalize_host(name)
            except HostNameError as exc:
                fail(f"--http-allowed-host: {exc}", 2)
        if self.keyfile is not None and self.certfile is None:
            fail("--http-ssl-keyfile needs --http-ssl-certfile", 2)
        for path in (self.certfile, self.keyfile):
            if path is not None and not path.is_file():
                fail(f"{path}: no such file", 2)
        if self.basic_without_tls and not is_loopback(host.strip("[]")):
            fail("--http-basic-without-tls is only for a loopback --http address (127.0.0.1, ::1)", 2)
        if self.metrics_auth and not self.auth:
            fail("--metrics-auth needs --http-auth", 2)
        return self

    def tls(self) -> HttpTls | None:
        from logtrove.http import HttpTls

        return (
            None
            if self.certfile is None
            else HttpTls(str(self.certfile), None if self.keyfile is None else str(self.keyfile))
        )

    def security(self, data_dir: Path, authorizer: Authorizer | None) -> HttpSecurity:
        from logtrove.acl.credentials import CredentialStore
        from logtrove.acl.tokens import TokenStore
        from logtrove.http import HttpSecurity

        return HttpSecurity(
            credentials=CredentialStore(data_dir) if self.auth else None,
            tokens=TokenStore(data_dir) if self.auth else None,
            authorizer=authorizer,
            tls=self.certfile is not None,
            basic_without_tls=self.basic_without_tls,
            metrics_auth=self.metrics_auth,
            allowed_hosts=self.allowed_hosts,
        )


_SECURITY = "HTTP security"
HttpAuthOption = Annotated[
    bool,
    typer.Option(
        "--http-auth",
        help="The HTTP API needs credentials: HTTP Basic with a `logtrove users` user (over HTTPS) "
        "or a bearer token of `logtrove tokens create`. /api/v1/health stays open.",
        rich_help_panel=_SECURITY,
    ),
]
HttpBasicWithoutTlsOption = Annotated[
    bool,
    typer.Option(
        "--http-basic-without-tls",
        help="Accept HTTP Basic passwords over plain HTTP (only for a loopback address).",
        rich_help_panel=_SECURITY,
    ),
]
HttpCertOption = Annotated[
    Path | None,
    typer.Option(
        "--http-ssl-certfile", help="PEM certificate (chain): serve HTTPS.", rich_help_panel=_SECURITY
    ),
]
HttpKeyOption = Annotated[
    Path | None,
    typer.Option(
        "--http-ssl-keyfile", help="PEM key of --http-ssl-certfile (if not in it).", rich_help_panel=_SECURITY
    ),
]
AllowedHostOption = Annotated[
    list[str] | None,
    typer.Option(
        "--http-allowed-host",
        help="A host name the HTTP API is reached by (besides localhost and its --http address), "
        "such as logs.example.com or *.example.com; requests naming another Host get 421 "
        "(the defence against DNS rebinding). Repeatable.",
        rich_help_panel=_SECURITY,
    ),
]
MetricsAuthOption = Annotated[
    bool,
    typer.Option(
        "--metrics-auth",
        help="/metrics needs credentials too (and DESCRIBE on the cluster with an authorizer); "
        "by default it is open, for Prometheus.",
        rich_help_panel=_SECURITY,
    ),
]


@app.command("http")
def http(
    data: DataOption = DEFAULT_DATA,
    listen: Annotated[
        str,
        typer.Option("--http", help="Serve the HTTP API and web console on HOST:PORT (as serve's --http)."),
    ] = "127.0.0.1:8080",
    old_listen: Annotated[
        str | None, typer.Option("--listen", "-l", hidden=True, help="The old name of --http.")
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
    max_body_mb: Annotated[int, body_limit_option()] = DEFAULT_MAX_BODY_BYTES >> 20,
    http_auth: HttpAuthOption = False,
    http_basic_without_tls: HttpBasicWithoutTlsOption = False,
    http_ssl_certfile: HttpCertOption = None,
    http_ssl_keyfile: HttpKeyOption = None,
    metrics_auth: MetricsAuthOption = False,
    http_allowed_host: AllowedHostOption = None,
    authorizer: Annotated[
        bool,
        typer.Option(
            "--authorizer/--no-authorizer",
            help="Enforce the ACLs of DATA_DIR/acls.json on the API (as `serve --authorizer`).",
            rich_help_panel=_SECURITY,
        ),
    ] = False,
    super_user: Annotated[
        list[str] | None,
        typer.Option(
            "--super-user", help="A principal allowed everything. Repeatable.", rich_help_panel=_SECURITY
        ),
    ] = None,
    allow_everyone_if_no_acl_found: Annotated[
        bool,
        typer.Option(
            "--allow-everyone-if-no-acl-found",
            help="With --authorizer: a resource no ACL covers is open to everyone.",
            rich_help_panel=_SECURITY,
        ),
    ] = False,
) -> None:
    """Serve the HTTP API and web console for a data directory (read-only).

    Examples:

      logtrove http --data ./data

      logtrove http --data ./data --http 127.0.0.1:9000
    """
    from logtrove.http import ListenAddressError, parse_listen, run

    listen = old_listen or listen
    try:
        host, port = parse_listen(listen)
    except ListenAddressError as exc:
        fail(f"--http: {exc}", 2)
    if log_level.lower() not in ("debug", "info", "warning", "error"):
        fail(f"--log-level must be debug, info, warning or error, got {log_level!r}", 2)
    options = HttpSecurityOptions(
        http_auth,
        http_basic_without_tls,
        http_ssl_certfile,
        http_ssl_keyfile,
        metrics_auth,
        tuple(http_allowed_host or ()),
    ).check(host)
    supers = _super_users(super_user or [])
    with open_storage(data, read_only=True) as storage, cli_errors():
        acl_authorizer = None
        if authorizer:
            from logtrove.acl import AclStore, Authorizer

            acl_authorizer = Authorizer(AclStore.load(storage.path), supers, allow_everyone_if_no_acl_found)
        scheme = "https" if http_ssl_certfile is not None else "http"
        err_console.print(f"logtrove console on {scheme}://{host}:{port}/ui/ (API /api/v1, schema /docs)")
        run(
            storage,
            f"{host}:{port}",
            log_level=log_level.lower(),
            max_body_bytes=max_body_mb << 20,
            tls=options.tls(),
            security=dataclasses.replace(options.security(storage.path, acl_authorizer), follow_acls=True),
        )


def _super_users(raw: list[str]) -> frozenset[str]:
    from logtrove.acl import AclError
    from logtrove.acl.model import check_principal

    try:
        return frozenset(check_principal(p) for p in raw)
    except AclError as exc:
        fail(f"--super-user: {exc}", 2)


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
        security: HttpSecurityOptions | None = None,
    ) -> None:
        self.broker = broker
        self.security = security or HttpSecurityOptions()
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

        return await append_durably(self.broker.context, topic, partition, batch)

    def _start(self) -> None:
        from logtrove.http import next_to_broker, start_in_thread

        options = next_to_broker(
            self._loop, self._append, self.broker.context.groups, self.broker.context.consumer_groups
        )
        try:
            server = start_in_thread(
                self.broker.storage,
                self.listen,
                max_body_bytes=self.max_body_bytes,
                lag_sample_interval_s=self.lag_sample_s,
                tls=self.security.tls(),
                security=self.security.security(self.broker.storage.path, self.broker.context.authorizer),
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
    security: HttpSecurityOptions | None = None,
) -> HttpBeside:
    """Start serving the API next to ``broker`` (see :class:`HttpBeside`); with
    ``lag_sample_s`` it samples every group's lag for the console's lag charts. The
    API uses the broker's authorizer (its ACLs and super users) when it has one."""
    return HttpBeside(
        broker, listen, max_body_bytes=max_body_bytes, lag_sample_s=lag_sample_s, security=security
    )


def body_limit_option() -> Any:
    """``--http-max-body-mb``, shared by ``serve`` and ``http``."""
    return typer.Option(
        "--http-max-body-mb",
        min=1,
        max=1024,
        help="Largest HTTP request body, MiB; larger ones get 413 while they are read.",
    )
