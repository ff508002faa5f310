"""``logtrove mirror``: follow another Kafka-protocol cluster into a data directory;
``logtrove promote``: make the followed topics ordinary (writable) topics.

Runs in the foreground until Ctrl-C or SIGTERM (the current round finishes, the status
is written, the data directory is closed cleanly), or with ``--once`` until every
followed partition has the source's log end. Progress goes to stderr every few seconds.

A secured source is reached with ``--source-config FILE``: librdkafka's property names,
as ``LOGTROVE_CLIENT_CONFIG`` takes them (:mod:`logtrove.client.security`), so
the password is in a file, never an argument ``ps`` shows. The file is read and its TLS
files loaded before the mirror starts; a refusal by the source stops it (exit 1).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from logtrove.cli.app import app
from logtrove.cli.common import DEFAULT_DATA, DataOption, err_console, fail, open_storage
from logtrove.client import ClientConfigError, ClientSecurity
from logtrove.groups import OffsetStore
from logtrove.mirror import Mirror, MirrorConfig, MirrorError
from logtrove.storage import Storage
from logtrove.storage.cleaner import Cleaner
from logtrove.storage.epochs import latest_epoch
from logtrove.storage.follow import STATUS_FILE

FollowTopics = Annotated[
    str,
    typer.Option(
        "--topics", "-t", help="Regular expression the whole topic name must match (internal topics never)."
    ),
]


def source_security(path: Path | None, option: str) -> ClientSecurity | None:
    """The TLS / SASL settings of ``path`` (``None``: PLAINTEXT), checked now: a file
    that cannot be read or used is a usage error before anything connects."""
    if path is None:
        return None
    try:
        security = ClientSecurity.load(path)
        if security.protocol.tls:
            security.context()
    except ClientConfigError as exc:
        fail(f"{option} {path}: {exc}", 2)
    return security


CLEANER_INTERVAL_S = 5.0
MAX_COMPACTION_ROUNDS = 1000


@app.command()
def mirror(
    source: Annotated[
        str, typer.Option("--from", "-f", help="HOST:PORT of a broker of the cluster to follow.")
    ],
    topics: FollowTopics = ".*",
    data: DataOption = DEFAULT_DATA,
    source_config: Annotated[
        Path | None,
        typer.Option(
            "--source-config",
            help="TLS / SASL towards the source: a properties file with librdkafka's names "
            "(security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, "
            "ssl.certificate.location, ssl.key.location).",
        ),
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="Stop when every followed partition has the source's log end.")
    ] = False,
    max_bytes_per_s: Annotated[
        int | None,
        typer.Option("--max-bytes-per-s", min=1024, help="Throttle: bytes appended per second, at most."),
    ] = None,
    groups: Annotated[
        bool,
        typer.Option(
            "--groups/--no-groups", help="Copy the source's consumer group commits on followed topics."
        ),
    ] = True,
    metadata_interval_ms: Annotated[
        int,
        typer.Option(
            "--metadata-interval-ms", min=10, help="How often to look for new topics and partitions."
        ),
    ] = 5000,
    compact: Annotated[
        bool,
        typer.Option(
            "--compact/--no-compact",
            help="Compact the compacted topics here too, as a broker does (--once: after copying). "
            "Offsets never change; --no-compact keeps every batch byte-equal to the source's.",
        ),
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
) -> None:
    """Follow a Kafka cluster's topics: batches byte for byte at the same offsets,
    read-only to clients, indexed like any topic. Compacted topics are copied from the
    source's log start and compacted here as well (offsets never change).

    Example (a SASL_SSL cluster): logtrove mirror --from kafka1:9093 --source-config source.properties
    """
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    security = source_security(source_config, "--source-config")
    config = MirrorConfig(
        source=source,
        security=security,
        topics=topics,
        max_bytes_per_s=max_bytes_per_s,
        groups=groups,
        metadata_interval_ms=metadata_interval_ms,
        groups_interval_ms=metadata_interval_ms,
        maintenance=True,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with open_storage(
        data, read_only=False, when_locked="Stop it first, or mirror into another directory."
    ) as storage:
        store = OffsetStore(storage) if groups else None
        if store is not None:
            store.load()
        try:
            follower = Mirror(storage, config, commit=store.commit if store is not None else None)
        except MirrorError as exc:
            fail(str(exc), 2)
        cleaner = Cleaner(storage)  # compacted topics are compacted here too, as a broker does
        if compact and not once:
            cleaner.start(CLEANER_INTERVAL_S)
        try:
            follower.run(stop, once=once, progress=None if quiet else _progress)
        except MirrorError as exc:
            fail(str(exc))
        finally:
            cleaner.stop()
            follower.close()
        _progress(follower)
        if compact and once:
            _compact(storage)
        if not follower.partitions:
            err_console.print(
                f"[yellow]warning:[/] no topic at {source} matches --topics {topics!r} (whole name; "
                "internal topics are never followed)",
                highlight=False,
            )
        failed = follower.failed()
    if failed:
        for (topic, partition), why in sorted(failed.items()):
            err_console.print(f"[bold red]error:[/] {topic}-{partition} not mirrored: {why}", highlight=False)
        raise typer.Exit(1)


@app.command()
def promote(
    topics: Annotated[
        list[str] | None, typer.Argument(help="Followed topics to promote (default: every followed topic).")
    ] = None,
    data: DataOption = DEFAULT_DATA,
) -> None:
    """Turn a mirror's topics into ordinary topics that take client writes, keeping every
    offset, record and group commit (the mirror must be stopped: a standby's failover).

    A standby is asynchronous: records the source acknowledged after the mirror's last
    fetch are not here. The topics' leader epoch is raised past every epoch their logs
    hold, so that mirrors of the old leader that follow this one truncate what it lacks.
    Example: logtrove promote --data ./standby
    """
    with open_storage(
        data, read_only=False, when_locked="Stop the mirror (or `serve --follow`) first, then promote."
    ) as storage:
        followed = [t.name for t in storage.topics() if t.followed_from is not None]
        chosen = topics or followed
        unknown = sorted(set(chosen) - set(followed))
        if unknown:
            fail(
                f"not followed topics here: {', '.join(unknown)} (followed: {', '.join(followed) or 'none'})"
            )
        for name in chosen:
            storage.follow_topic(name, None)
            storage.set_leader_epoch(name, _next_epoch(storage, name))
        if set(chosen) == set(followed):
            (storage.path / STATUS_FILE).unlink(missing_ok=True)  # no mirror lag to report any more
    err_console.print(
        f"promoted {len(chosen)} topic(s): {', '.join(chosen) or '-'}; they take client writes now",
        highlight=False,
    )


def _compact(storage: Storage) -> None:
    """``--once``: the seed's standby of a compacted topic, copied from the leader's log
    start and then compacted (a bounded number of rounds; the cleaner decides what is due)."""
    cleaner = Cleaner(storage)
    for _ in range(MAX_COMPACTION_ROUNDS):
        if cleaner.run_once() is None:
            break


def _next_epoch(storage: Storage, name: str) -> int:
    """A promoted topic's leader epoch: past every epoch its logs hold (the old leader's,
    copied with its batches), so that followers of the new leader find where their logs
    part from it (OffsetForLeaderEpoch; logtrove.storage.epochs)."""
    info = storage.topic(name)
    held = (latest_epoch(storage.log(name, p)) for p in range(info.partitions))
    return max(info.leader_epoch, *held) + 1


def _progress(follower: Mirror) -> None:
    stats = follower.stats
    elapsed = max(time.monotonic() - stats.started, 1e-9)
    rows = follower.lag()
    behind = sum(r.lag_records for r in rows)
    err_console.print(
        f"mirrored {stats.records:,} records ({stats.bytes / 1e6:,.1f} MB) in {elapsed:,.1f} s "
        f"({stats.records / elapsed:,.0f} records/s); {len(rows)} partitions, {behind:,} records behind; "
        f"{stats.commits} group commits copied",
        highlight=False,
    )


__all__ = ["mirror", "promote", "source_security"]
