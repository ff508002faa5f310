"""``logtrove serve``: run the Kafka-compatible broker on a data directory."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from logtrove.broker import Broker, BrokerConfig, run
from logtrove.broker.listeners import (
    ClientAuth,
    Listener,
    ListenerError,
    TlsSettings,
    check_listeners,
    parse_listener,
    server_context,
    with_advertised,
)
from logtrove.cli.app import app
from logtrove.cli.common import DEFAULT_DATA, DataOption, cli_errors, fail
from logtrove.cli.http import (
    DEFAULT_MAX_BODY_BYTES,
    AllowedHostOption,
    HttpAuthOption,
    HttpBasicWithoutTlsOption,
    HttpBeside,
    HttpCertOption,
    HttpKeyOption,
    HttpSecurityOptions,
    MetricsAuthOption,
    body_limit_option,
    check_listen,
    start_beside,
)
from logtrove.cli.mirror import source_security
from logtrove.groups import CommittedOffset
from logtrove.mirror import Mirror, MirrorConfig, MirrorError, MirrorThread
from logtrove.storage import DEFAULT_MAX_TOTAL_PARTITIONS, Storage


def start_following(broker: Broker, config: MirrorConfig) -> None:
    """``--follow``: a mirror thread beside the broker, stopped before its storage closes.
    It appends to the followed topics itself (their only writer); group commits and
    fetch wake-ups are handed to the broker's event loop, which owns them."""
    loop = asyncio.get_running_loop()

    def commit(group: str, commits: dict[tuple[str, int], CommittedOffset]) -> None:
        loop.call_soon_threadsafe(broker.context.offsets.commit, group, commits)

    def woken() -> None:
        loop.call_soon_threadsafe(broker.context.notify_append)

    try:
        follower = Mirror(broker.storage, config, commit=commit, on_append=woken)
    except MirrorError as exc:
        fail(str(exc), 2)
    thread = MirrorThread(follower)
    broker.before_stop.append(thread.stop)
    thread.start()


def _listeners(listen: list[str], advertise: list[str]) -> list[Listener]:
    try:
        listeners = with_advertised([parse_listener(text) for text in listen], advertise)
    except ListenerError as exc:
        fail(str(exc), 2)
    return listeners


def _tls(
    certfile: Path | None,
    keyfile: Path | None,
    cafile: Path | None,
    client_auth: str,
    listeners: list[Listener],
) -> TlsSettings | None:
    """The TLS settings, checked now (files readable, a certificate for a TLS listener)
    so that a mistake is a clear message before the data directory is opened."""
    try:
        auth = ClientAuth(client_auth.lower())
    except ValueError:
        fail(f"--ssl-client-auth is none, requested or required, got {client_auth!r}", 2)
    tls = None if certfile is None else TlsSettings(certfile, keyfile, cafile, auth)
    try:
        check_listeners(listeners, tls)
        if tls is not None:
            server_context(tls)
    except ListenerError as exc:
        fail(str(exc), 2)
    return tls


@app.command()
def serve(
    data: DataOption = DEFAULT_DATA,
    listen: Annotated[
        list[str] | None,
        typer.Option(
            "--listen",
            "-l",
            help="Listener, [PROTOCOL://]HOST:PORT with PROTOCOL one of PLAINTEXT (the default), SSL, "
            "SASL_PLAINTEXT, SASL_SSL; repeat for several (default: 127.0.0.1:9092).",
        ),
    ] = None,
    advertise: Annotated[
        list[str] | None,
        typer.Option(
            "--advertise",
            help="[PROTOCOL://]HOST:PORT given to the clients of the listener of that protocol "
            "(default: its --listen address); repeatable.",
        ),
    ] = None,
    ssl_certfile: Annotated[
        Path | None,
        typer.Option(
            "--ssl-certfile",
            help="PEM certificate (chain) of SSL / SASL_SSL listeners.",
            rich_help_panel="Security",
        ),
    ] = None,
    ssl_keyfile: Annotated[
        Path | None,
        typer.Option(
            "--ssl-keyfile",
            help="PEM private key of --ssl-certfile (if not in it).",
            rich_help_panel="Security",
        ),
    ] = None,
    ssl_cafile: Annotated[
        Path | None,
        typer.Option(
            "--ssl-cafile",
            help="PEM CA certificates client certificates are checked against.",
            rich_help_panel="Security",
        ),
    ] = None,
    ssl_client_auth: Annotated[
        str,
        typer.Option(
            "--ssl-client-auth",
            help="Ask TLS clients for a certificate: none, requested or required (its subject is the principal).",
            rich_help_panel="Security",
        ),
    ] = "none",
    sasl_auth_timeout_ms: Annotated[
        int,
        typer.Option(
            "--sasl-auth-timeout-ms",
            min=1,
            help="Close a SASL connection not authenticated this long after it was accepted.",
            rich_help_panel="Security",
        ),
    ] = 10_000,
    auto_create_topics: Annotated[
        bool,
        typer.Option(
            "--auto-create-topics/--no-auto-create-topics", help="Create unknown topics on metadata requests."
        ),
    ] = True,
    default_partitions: Annotated[
        int, typer.Option("--default-partitions", min=1, help="Partitions of auto-created topics.")
    ] = 1,
    initial_rebalance_delay_ms: Annotated[
        int,
        typer.Option(
            "--initial-rebalance-delay-ms",
            min=0,
            help="Wait for more members before a new group's first rebalance.",
        ),
    ] = 3000,
    consumer_session_timeout_ms: Annotated[
        int,
        typer.Option(
            "--consumer-session-timeout-ms",
            min=1000,
            help="Consumer-protocol (KIP-848) members silent this long are removed.",
        ),
    ] = 45_000,
    consumer_heartbeat_interval_ms: Annotated[
        int,
        typer.Option(
            "--consumer-heartbeat-interval-ms",
            min=100,
            help="How often consumer-protocol (KIP-848) members are told to heartbeat.",
        ),
    ] = 5000,
    max_frame_bytes: Annotated[
        int, typer.Option("--max-frame-bytes", min=1024, help="Largest request accepted.")
    ] = 100 * 1024 * 1024,
    max_connections: Annotated[
        int | None,
        typer.Option(
            "--max-connections",
            min=1,
            help="Kafka connections open at once; more are closed when accepted "
            "(default: half the descriptor limit, `ulimit -n`).",
            rich_help_panel="Limits",
        ),
    ] = None,
    max_connections_per_ip: Annotated[
        int | None,
        typer.Option(
            "--max-connections-per-ip",
            min=1,
            help="Kafka connections open at once from one address (default: no limit of its own).",
            rich_help_panel="Limits",
        ),
    ] = None,
    connections_max_idle_ms: Annotated[
        int,
        typer.Option(
            "--connections-max-idle-ms",
            min=1,
            help="Close a Kafka connection that sends no request, or takes no reply, for this long.",
            rich_help_panel="Limits",
        ),
    ] = 600_000,
    request_read_timeout_ms: Annotated[
        int,
        typer.Option(
            "--request-read-timeout-ms",
            min=1,
            help="Close a connection whose begun request has not arrived whole after this long.",
            rich_help_panel="Limits",
        ),
    ] = 30_000,
    fetch_max_bytes: Annotated[
        int,
        typer.Option(
            "--fetch-max-bytes",
            min=1024,
            help="Record bytes one Fetch response may hold, whatever the client asks (one batch may exceed it).",
            rich_help_panel="Limits",
        ),
    ] = 55 * 1024 * 1024,
    fetch_memory_mb: Annotated[
        int,
        typer.Option(
            "--fetch-memory-mb",
            min=1,
            help="Memory all replies not yet taken by their clients may hold, MiB; past it a Fetch gives one batch.",
            rich_help_panel="Limits",
        ),
    ] = 256,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
    http: Annotated[
        str, typer.Option("--http", help="Serve the HTTP API and web console on HOST:PORT.")
    ] = "127.0.0.1:8080",
    no_http: Annotated[
        bool, typer.Option("--no-http", help="Do not serve the HTTP API and console.")
    ] = False,
    indexer: Annotated[
        bool,
        typer.Option(
            "--indexer/--no-indexer",
            help="Index keys, IDs, tags and content in a child process (queries scan what is not indexed).",
        ),
    ] = True,
    indexer_flush_s: Annotated[
        float,
        typer.Option(
            "--indexer-flush-s",
            min=0.01,
            help="Seconds after which the indexer writes a partial block for the newest records.",
        ),
    ] = 5.0,
    cleaner: Annotated[
        bool,
        typer.Option("--cleaner/--no-cleaner", help="Compact the compacted topics in the background."),
    ] = True,
    cleaner_interval_s: Annotated[
        float, typer.Option("--cleaner-interval-s", min=0.01, help="Seconds between the cleaner's checks.")
    ] = 5.0,
    cleaner_map_mb: Annotated[
        int, typer.Option("--cleaner-map-mb", min=1, help="Memory budget of the cleaner's key map, MiB.")
    ] = 64,
    max_partitions: Annotated[
        int,
        typer.Option(
            "--max-partitions",
            min=1,
            help="Most partitions over all topics; creations past it are refused (POLICY_VIOLATION).",
        ),
    ] = DEFAULT_MAX_TOTAL_PARTITIONS,
    durable_acks: Annotated[
        bool,
        typer.Option(
            "--durable-acks/--no-durable-acks",
            help="Answer acks=1/all only once the records are fsynced, on every topic (as flush.messages=1; "
            "fsyncs are grouped off the event loop). Default: fsync within flush.ms (1 s).",
        ),
    ] = False,
    authorizer: Annotated[
        bool,
        typer.Option(
            "--authorizer/--no-authorizer",
            help="Enforce the ACLs (DATA_DIR/acls.json; manage them with `logtrove acls` or any Kafka "
            "admin client). A resource no ACL covers is closed unless --allow-everyone-if-no-acl-found.",
        ),
    ] = False,
    super_user: Annotated[
        list[str] | None,
        typer.Option(
            "--super-user",
            help="A principal allowed everything (Kafka's super.users), e.g. User:admin. Repeatable.",
        ),
    ] = None,
    allow_everyone_if_no_acl_found: Annotated[
        bool,
        typer.Option(
            "--allow-everyone-if-no-acl-found",
            help="With --authorizer: a resource that no ACL covers is open to everyone.",
        ),
    ] = False,
    transaction_max_timeout_ms: Annotated[
        int,
        typer.Option(
            "--transaction-max-timeout-ms",
            min=1,
            help="Longest transaction timeout a transactional producer may ask for "
            "(Kafka's transaction.max.timeout.ms); a transaction open longer than its own timeout is aborted.",
        ),
    ] = 900_000,
    http_max_body_mb: Annotated[int, body_limit_option()] = DEFAULT_MAX_BODY_BYTES >> 20,
    http_auth: HttpAuthOption = False,
    http_basic_without_tls: HttpBasicWithoutTlsOption = False,
    http_ssl_certfile: HttpCertOption = None,
    http_ssl_keyfile: HttpKeyOption = None,
    metrics_auth: MetricsAuthOption = False,
    http_allowed_host: AllowedHostOption = None,
    lag_sample_s: Annotated[
        float,
        typer.Option(
            "--lag-sample-s",
            min=0.1,
            help="Seconds between samples of every group's lag (kept 24 h in lag-history.jsonl, for the console's lag charts).",
        ),
    ] = 10.0,
    follow: Annotated[
        str | None,
        typer.Option(
            "--follow",
            help="Mirror the topics of the Kafka cluster at HOST:PORT while serving (read-only to clients).",
            rich_help_panel="Mirror",
        ),
    ] = None,
    follow_topics: Annotated[
        str,
        typer.Option(
            "--follow-topics",
            help="Regular expression of the topics --follow mirrors.",
            rich_help_panel="Mirror",
        ),
    ] = ".*",
    follow_max_bytes_per_s: Annotated[
        int | None,
        typer.Option(
            "--follow-max-bytes-per-s",
            min=1024,
            help="Throttle of --follow, bytes/s.",
            rich_help_panel="Mirror",
        ),
    ] = None,
    follow_config: Annotated[
        Path | None,
        typer.Option(
            "--follow-config",
            help="TLS / SASL towards the --follow cluster: a librdkafka-style properties file "
            "(as `logtrove mirror --source-config`).",
            rich_help_panel="Mirror",
        ),
    ] = None,
) -> None:
    """Serve the data directory over the Kafka protocol until SIGINT or SIGTERM."""
    listeners = _listeners(listen or ["127.0.0.1:9092"], advertise or [])
    http_listen = None if no_http else check_listen("--http", http)
    http_security = HttpSecurityOptions(
        http_auth,
        http_basic_without_tls,
        http_ssl_certfile,
        http_ssl_keyfile,
        metrics_auth,
        # the names the Kafka clients are given reach this machine, so the console's too
        tuple(http_allowed_host or ()) + tuple(li.advertised_host for li in listeners if li.advertised_host),
    )
    if http_listen is not None:
        http_security.check(http_listen.rpartition(":")[0])
    http_servers: list[HttpBeside] = []
    logging.basicConfig(
        level=log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    tls = _tls(ssl_certfile, ssl_keyfile, ssl_cafile, ssl_client_auth, listeners)
    config = BrokerConfig(
        host=listeners[0].host,
        port=listeners[0].port,
        listeners=tuple(listeners),
        tls=tls,
        sasl_auth_timeout_ms=sasl_auth_timeout_ms,
        auto_create_topics=auto_create_topics,
        default_partitions=default_partitions,
        max_frame_bytes=max_frame_bytes,
        max_connections=max_connections,
        max_connections_per_ip=max_connections_per_ip,
        connections_max_idle_ms=connections_max_idle_ms,
        request_read_timeout_ms=request_read_timeout_ms,
        fetch_max_bytes=fetch_max_bytes,
        fetch_memory_bytes=fetch_memory_mb << 20,
        initial_rebalance_delay_ms=initial_rebalance_delay_ms,
        consumer_session_timeout_ms=consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms=consumer_heartbeat_interval_ms,
        indexer=indexer,
        indexer_flush_ms=max(1, round(indexer_flush_s * 1000)),
        cleaner=cleaner,
        cleaner_interval_ms=max(1, round(cleaner_interval_s * 1000)),
        cleaner_map_bytes=cleaner_map_mb << 20,
        max_partitions=max_partitions,
        durable_acks=durable_acks,
        authorizer=authorizer,
        super_users=tuple(_principals(super_user or [])),
        allow_if_no_acl=allow_everyone_if_no_acl_found,
        transaction_max_timeout_ms=transaction_max_timeout_ms,
    )
    mirror_config = None
    if follow is None and follow_config is not None:
        fail("--follow-config is for --follow HOST:PORT, which is missing", 2)
    if follow is not None:
        try:
            re.compile(follow_topics)
        except re.error as exc:
            fail(f"--follow-topics {follow_topics!r} is not a regular expression: {exc}", 2)
        mirror_config = MirrorConfig(
            source=follow,
            security=source_security(follow_config, "--follow-config"),
            topics=follow_topics,
            max_bytes_per_s=follow_max_bytes_per_s,
        )
    with cli_errors():
        storage = Storage.open(data, holder=f"logtrove serve {' '.join(map(str, listeners))}")

    def ready(broker: Broker) -> None:
        for listener in broker.context.listeners:
            bound = f"{listener.host}:{broker.context.bound_ports[listener.name]}"
            print(f"logtrove serving {data} on {bound} ({listener.name})", flush=True)
        if mirror_config is not None:
            start_following(broker, mirror_config)
        if http_listen is not None:
            http_servers.append(
                start_beside(
                    broker,
                    http_listen,
                    max_body_bytes=http_max_body_mb << 20,
                    lag_sample_s=lag_sample_s,
                    security=http_security,
                )
            )

    try:
        with cli_errors():
            run(storage, config, ready=ready)
    finally:
        for server in http_servers:
            server.stop()


def _principals(raw: list[str]) -> list[str]:
    """``--super-user`` values, checked (``Type:name``); a wrong one ends with exit code 2."""
    from logtrove.acl import AclError
    from logtrove.acl.model import check_principal

    try:
        return [check_principal(p) for p in raw]
    except AclError as exc:
        fail(f"--super-user: {exc}", 2)
