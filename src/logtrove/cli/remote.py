"""``--bootstrap HOST:PORT``: the ``topics`` and ``produce`` commands through a running
broker instead of the data directory (which the broker holds locked).

Each function does one command over the Kafka protocol (:mod:`logtrove.broker.client`)
and prints like its local counterpart; sizes on disk and compaction status are only
known locally and are left out.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from logtrove.broker.client import KafkaClient, KafkaProtocolError, check
from logtrove.broker.client_security import ClientSecurity
from logtrove.cli import remote_groups
from logtrove.cli.common import console, err_console, fail
from logtrove.cli.remote_groups import topic_partitions
from logtrove.cli.remote_tags import HttpApi, HttpApiError, http_url
from logtrove.records import Compression, NewRecord, build_batch
from logtrove.storage import StorageError
from logtrove.storage.indexer import recorded_index_offsets
from logtrove.wire import ApiKey

BootstrapOption = Annotated[
    str | None,
    typer.Option(
        "--bootstrap",
        "-b",
        envvar="LOGTROVE_BOOTSTRAP",
        help="Work through a running broker at HOST:PORT instead of the data directory "
        "(TLS / SASL: a librdkafka-style properties file named by LOGTROVE_CLIENT_CONFIG).",
    ),
]

TOPIC_RESOURCE = 2
SET, DELETE = 0, 1


@contextlib.contextmanager
def connect(bootstrap: str) -> Iterator[KafkaClient]:
    """A client, with broker and connection errors turned into CLI errors."""
    try:
        config = os.environ.get("LOGTROVE_CLIENT_CONFIG")
        security = ClientSecurity.load(Path(config)) if config else None
        client = KafkaClient(bootstrap, security=security)
    except (OSError, ValueError, KafkaProtocolError) as exc:
        fail(f"cannot connect to the broker at {bootstrap}: {exc}")
    try:
        with client:
            yield client
    except KafkaProtocolError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"connection to the broker at {bootstrap} failed: {exc}")


def _metadata(client: KafkaClient, topics: list[str] | None) -> Any:
    body = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
    }
    return client.request(ApiKey.METADATA, 12, body)


def _offsets(client: KafkaClient, topic: str, partitions: int, timestamp: int) -> list[int]:
    body = {
        "replica_id": -1,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": p, "timestamp": timestamp} for p in range(partitions)],
            }
        ],
    }
    parts = client.request(ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions
    return [p.offset for p in sorted(parts, key=lambda p: p.partition_index)]


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str], as_json: bool) -> None:
    with connect(bootstrap) as client:
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": -1,
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "timeout": 30_000,
        }
        result = client.request(ApiKey.CREATE_TOPICS, 7, body).topics[0]
        check(result.error_code, result.error_message, f"create {name}")
    if as_json:
        console.print_json(
            json.dumps({"name": name, "topic_id": str(result.topic_id), "partitions": partitions})
        )
    else:
        console.print(f"Created topic [bold]{name}[/] with {partitions} partition(s).")


def list_topics(bootstrap: str, internal: bool, as_json: bool) -> None:
    with connect(bootstrap) as client:
        rows = []
        for t in sorted(_metadata(client, None).topics, key=lambda t: t.name):
            if (t.is_internal and not internal) or (t.name.startswith("__") and not internal):
                continue
            n = len(t.partitions)
            starts, ends = _offsets(client, t.name, n, -2), _offsets(client, t.name, n, -1)
            rows.append({"name": t.name, "partitions": n, "messages": sum(ends) - sum(starts)})
    if as_json:
        console.print_json(json.dumps(rows))
        return
    table = Table("topic", "partitions", "messages (approx.)")
    for row in rows:
        table.add_row(row["name"], str(row["partitions"]), f"{row['messages']:,}")
    console.print(table if rows else "[dim]no topics[/]")


def describe_topic(bootstrap: str, name: str, as_json: bool, *, data: Path, http: str | None) -> None:
    """Offsets and configs over the Kafka protocol; how far the broker's indexer got from
    its data directory when it is this machine's ``data`` (and ``http`` is not given),
    else from its HTTP API. Without either, the indexed offsets are left out with a
    warning: the rest of the answer does not depend on them."""
    with connect(bootstrap) as client:
        n = topic_partitions(client, name)
        if n is None:
            fail(f"unknown topic {name!r} at {bootstrap}")
        starts, ends = _offsets(client, name, n, -2), _offsets(client, name, n, -1)
        body = {
            "resources": [
                {"resource_type": TOPIC_RESOURCE, "resource_name": name, "configuration_keys": None}
            ]
        }
        result = client.request(ApiKey.DESCRIBE_CONFIGS, 4, body).results[0]
        check(result.error_code, result.error_message, f"describe {name}")
        indexed = _indexed_offsets(client, bootstrap, name, data, http)
    configs = [
        {"name": c.name, "value": c.value, "source": "topic" if c.config_source == 1 else "default"}
        for c in result.configs
    ]
    partitions: list[dict[str, Any]] = [
        {"partition": p, "log_start_offset": starts[p], "log_end_offset": ends[p]} for p in range(n)
    ]
    if indexed is not None:
        for row in partitions:
            row["indexed_offset"] = indexed.get(row["partition"])
    if as_json:
        console.print_json(
            json.dumps({"name": name, "partitions": n, "partition_details": partitions, "configs": configs})
        )
        return
    console.print(f"[bold]{name}[/]  ({bootstrap})")
    columns = ["partition", "log start", "log end"] + (["indexed below"] if indexed is not None else [])
    table = Table(*columns)
    for p in partitions:
        cells = [str(p["partition"]), f"{p['log_start_offset']:,}", f"{p['log_end_offset']:,}"]
        if indexed is not None:
            cells.append("-" if p["indexed_offset"] is None else f"{p['indexed_offset']:,}")
        table.add_row(*cells)
    console.print(table)
    config_table = Table("config", "value", "source")
    for c in configs:
        config_table.add_row(
            c["name"], c["value"] or "", c["source"], style=None if c["source"] == "topic" else "dim"
        )
    console.print(config_table)


def _indexed_offsets(
    client: KafkaClient, bootstrap: str, name: str, data: Path, http: str | None
) -> dict[int, int | None] | None:
    """Per partition of ``name``, the broker indexer's checkpoint (``None`` where it has
    not recorded the partition); ``None`` with a warning when neither the broker's data
    directory nor its HTTP API can be read."""
    cluster = remote_groups.cluster_id(client)
    if http is None:
        try:
            storage = remote_groups.open_brokers_data(data, cluster)
        except StorageError:
            storage = None
        if storage is not None:
            with storage:
                recorded = recorded_index_offsets(storage.path)
            return {p: offset for (topic, p), offset in recorded.items() if topic == name}
    api = HttpApi(http_url(bootstrap, http), cluster_id=cluster)
    try:
        detail = api.get(f"/api/v1/topics/{urllib.parse.quote(name, safe='')}", {})
    except HttpApiError as exc:
        err_console.print(f"[yellow]warning:[/] indexed offsets left out: {exc}", highlight=False)
        return None
    return {int(row["partition"]): row.get("indexed_offset") for row in detail.get("partition_list", [])}


def alter_topic(
    bootstrap: str, name: str, sets: dict[str, str], deletes: list[str], partitions: int | None
) -> None:
    with connect(bootstrap) as client:
        if sets or deletes:
            configs = [{"name": k, "config_operation": SET, "value": v} for k, v in sets.items()]
            configs += [{"name": k, "config_operation": DELETE, "value": None} for k in deletes]
            body: dict[str, Any] = {
                "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": configs}]
            }
            result = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]
            check(result.error_code, result.error_message, f"alter {name}")
        if partitions is not None:
            grow = {"topics": [{"name": name, "count": partitions, "assignments": None}], "timeout": 30_000}
            result = client.request(ApiKey.CREATE_PARTITIONS, 3, grow).results[0]
            check(result.error_code, result.error_message, f"grow {name}")
    console.print(f"Altered topic [bold]{name}[/].")


def delete_topic(bootstrap: str, name: str) -> None:
    with connect(bootstrap) as client:
        result = client.request(
            ApiKey.DELETE_TOPICS, 5, {"topic_names": [name], "timeout": 30_000}
        ).responses[0]
        check(result.error_code, result.error_message, f"delete {name}")
    console.print(f"Deleted topic [bold]{name}[/].")


def ensure_topic(client: KafkaClient, topic: str, partitions: int) -> int:
    """The topic's partition count, creating it with ``partitions`` if it is missing."""
    found = topic_partitions(client, topic)
    if found is not None:
        return found
    body = {
        "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": -1}],
        "timeout": 30_000,
    }
    result = client.request(ApiKey.CREATE_TOPICS, 7, body).topics[0]
    check(result.error_code, result.error_message, f"create {topic}")
    err_console.print(f"created topic {topic} with {partitions} partition(s)")
    return partitions


def produce_batches(
    client: KafkaClient, topic: str, batches: dict[int, list[list[NewRecord]]], codec: Compression
) -> list[dict[str, int]]:
    """Send every batch (acks=all, one request each, in order per partition)."""
    summary = []
    for p in sorted(batches):
        first = last = -1
        for chunk in batches[p]:
            data = {
                "name": topic,
                "partition_data": [{"index": p, "records": build_batch(chunk, compression=codec)}],
            }
            resp = client.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout": 30_000, "topic_data": [data]})
            part = resp.responses[0].partition_responses[0]
            check(part.error_code, part.error_message, f"produce to {topic}-{p}")
            first = part.base_offset if first < 0 else first
            last = part.base_offset + len(chunk) - 1
        summary.append(
            {
                "partition": p,
                "records": sum(len(c) for c in batches[p]),
                "batches": len(batches[p]),
                "first_offset": first,
                "last_offset": last,
            }
        )
    return summary
