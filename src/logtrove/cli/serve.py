"""``logtrove serve``: run the Kafka-compatible broker on a data directory."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from typing import Annotated

import typer

from logtrove.broker import Broker, BrokerConfig, run
from logtrove.cli.common import DEFAULT_DATA, DataOption, cli_errors, fail
from logtrove.cli.http import (
    DEFAULT_MAX_BODY_BYTES,
    HttpBeside,
    body_limit_option,
    check_listen,
    start_beside,
)
from logtrove.cli.main import app
from logtrove.groups import CommittedOffset
from logtrove.mirror import Mirror, MirrorConfig, MirrorError, MirrorThread
from logtrove.storage import DEFAULT_MAX_TOTAL_PARTITIONS, Storage


def start_following(broker: Broker, config: MirrorConfig) -> None:
    """``--follow``: a mirror thread beside the broker, stopped before its storage closes.
    It appends to the followed topics itself (their only writer); group commits and
    fetch wake-ups are handed to the broker's event loop, which owns them."""
    loop = asyncio.get_running_loop()

    def commit(group: str, commits: dict[tuple[str, int], CommittedOffset]) -> None:
        loop.call_soon_threadsafe(broker.offsets.commit, group, commits)

    def woken() -> None:
        loop.call_soon_threadsafe(broker.notify_append)

    try:
        follower = Mirror(broker.storage, config, commit=commit, on_append=woken)
    except MirrorError as exc:
        fail(str(exc), 2)
    thread = MirrorThread(follower)
    broker.before_stop.append(thread.stop)
    thread.start()


def _parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(f"--listen needs HOST:PORT, got {text!r}", 2)
    return host or "127.0.0.1", int(port)


@app.command()
def serve(
    data: DataOption = DEFAULT_DATA,
    listen: Annotated[
        str, typer.Option("--listen", "-l", help="Address to listen on, HOST:PORT.")
    ] = "127.0.0.1:9092",
    advertise: Annotated[
        str | None, typer.Option("--advertise", help="HOST:PORT given to clients (default: --listen).")
    ] = None,
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
    http_max_body_mb: Annotated[int, body_limit_option()] = DEFAULT_MAX_BODY_BYTES >> 20,
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
) -> None:
    """Serve the data directory over the Kafka protocol until SIGINT or SIGTERM."""
    http_listen = None if no_http else check_listen("--http", http)
    http_servers: list[HttpBeside] = []
    logging.basicConfig(
        level=log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    host, port = _parse_listen(listen)
    adv_host, adv_port = _parse_listen(advertise) if advertise else (None, None)
    config = BrokerConfig(
        host=host,
        port=port,
        advertised_host=adv_host,
        advertised_port=adv_port,
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
        indexer=indexer,
        indexer_flush_ms=max(1, round(indexer_flush_s * 1000)),
        cleaner=cleaner,
        cleaner_interval_ms=max(1, round(cleaner_interval_s * 1000)),
        cleaner_map_bytes=cleaner_map_mb << 20,
        max_partitions=max_partitions,
        durable_acks=durable_acks,
    )
    mirror_config = None
    if follow is not None:
        try:
            re.compile(follow_topics)
        except re.error as exc:
            fail(f"--follow-topics {follow_topics!r} is not a regular expression: {exc}", 2)
        mirror_config = MirrorConfig(
            source=follow, topics=follow_topics, max_bytes_per_s=follow_max_bytes_per_s
        )
    with cli_errors():
        storage = Storage.open(data, holder=f"logtrove serve {listen}")

    def ready(broker: Broker) -> None:
        print(f"logtrove serving {data} on {broker.config.host}:{broker.bound_port}", flush=True)
        if mirror_config is not None:
            start_following(broker, mirror_config)
        if http_listen is not None:
            http_servers.append(
                start_beside(
                    broker, http_listen, max_body_bytes=http_max_body_mb << 20, lag_sample_s=lag_sample_s
                )
            )

    try:
        with cli_errors():
            run(storage, config, ready=ready)
    finally:
        for server in http_servers:
            server.stop()
