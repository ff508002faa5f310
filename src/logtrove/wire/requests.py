"""Requests as bytes, and the bodies of the requests clients send most.

:func:`encode_request` frames a request from the version-independent dict that
:func:`~logtrove.wire.entities.build` turns into kio's dataclass of the version asked
for; :func:`decode_response` reads the answer's frame back. The body builders below are
the one place each of these requests is written: the CLI, the mirror, the lag and
consumer clients and the tests all send them through here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from logtrove.wire.api_keys import ApiKey
from logtrove.wire.entities import build
from logtrove.wire.framing import encode

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps: the log start, the log end (or LSO)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # isolation levels of Fetch and ListOffsets
ACKS_ALL = -1
DEFAULT_TIMEOUT_MS = 30_000


class ResponseError(ValueError):
    """A response frame that does not decode, or answers another request."""


def encode_request(
    api_key: ApiKey | int, version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> bytes:
    """The request (header and body, without the size prefix)."""
    req_cls = load_request_schema(api_key, version)
    header_cls = req_cls.__header_schema__
    header = build(
        header_cls,
        {
            "request_api_key": int(api_key),
            "request_api_version": version,
            "correlation_id": correlation_id,
            "client_id": client_id,
        },
    )
    return encode(header) + encode(build(req_cls, body))


def decode_response(api_key: ApiKey | int, version: int, correlation_id: int, frame: bytes) -> Any:
    """The body (a kio entity) of the response ``frame`` (without its size prefix) to
    request ``correlation_id``; raises :class:`ResponseError`."""
    resp_cls = load_response_schema(api_key, version)
    try:
        header, used = entity_reader(resp_cls.__header_schema__)(frame, 0)
        value, _ = entity_reader(resp_cls)(frame, used)
    except (ValueError, KeyError) as exc:
        raise ResponseError(f"unreadable response to api key {int(api_key)}: {exc}") from exc
    if header.correlation_id != correlation_id:
        raise ResponseError("response out of order (correlation id mismatch)")
    return value


def metadata_body(topics: Iterable[str] | None) -> dict[str, Any]:
    """Metadata of ``topics`` (``None``: every topic), creating none."""
    return {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
    }


def list_offsets_body(
    topic: str, partitions: Iterable[int], timestamp: int, *, read_committed: bool = False
) -> dict[str, Any]:
    """ListOffsets (v1+) of ``timestamp`` (or :data:`EARLIEST` / :data:`LATEST`; LATEST
    is the last stable offset with ``read_committed``) on ``partitions`` of ``topic``."""
    return {
        "replica_id": -1,
        "isolation_level": READ_COMMITTED if read_committed else READ_UNCOMMITTED,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": p, "timestamp": timestamp} for p in partitions],
            }
        ],
    }


def create_topics_body(
    name: str,
    partitions: int,
    configs: Mapping[str, str] | None = None,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[str, Any]:
    """CreateTopics of one topic, the broker's replication factor."""
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": -1,
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout": timeout_ms,
    }


def produce_body(
    topic: str, partition: int, records: bytes, *, acks: int = ACKS_ALL, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> dict[str, Any]:
    """Produce of one record batch (``records``, already encoded) to one partition."""
    data = {"name": topic, "partition_data": [{"index": partition, "records": records}]}
    return {"acks": acks, "timeout": timeout_ms, "topic_data": [data]}


def fetch_body(
    wants: Mapping[str, Sequence[tuple[int, int, int]]],
    *,
    max_wait_ms: int,
    max_bytes: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> dict[str, Any]:
    """The body of a consumer's Fetch (v4-v12: replica id -1, READ_UNCOMMITTED unless
    ``isolation_level`` is 1, no fetch session) for ``wants``: topic -> (partition, fetch
    offset, partition max bytes)."""
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_max,
                    }
                    for partition, offset, partition_max in parts
                ],
            }
            for topic, parts in wants.items()
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


TOPIC_RESOURCE = 2  # DescribeConfigs / AlterConfigs resource type of a topic


def describe_configs_body(topics: Iterable[str], keys: Iterable[str] | None = None) -> dict[str, Any]:
    """DescribeConfigs (v4) of ``topics``: the configs named in ``keys`` (``None``: all)."""
    wanted = None if keys is None else list(keys)
    return {
        "resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": name, "configuration_keys": wanted}
            for name in topics
        ]
    }


def offset_for_leader_epoch_body(topic: str, asked: Iterable[tuple[int, int, int]]) -> dict[str, Any]:
    """OffsetForLeaderEpoch (v3) as a consumer (replica id -1) of ``topic``: ``asked`` holds
    (partition, current leader epoch or -1, the epoch whose end offset is wanted)."""
    partitions = [
        {"partition": p, "current_leader_epoch": current, "leader_epoch": epoch}
        for p, current, epoch in asked
    ]
    return {"replica_id": -1, "topics": [{"topic": topic, "partitions": partitions}]}


def offset_fetch_body(group: str, topics: Mapping[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """OffsetFetch (v8) of one group: the commits on ``topics`` (topic -> partitions;
    ``None``: every commit), stable or not."""
    wanted = (
        None if topics is None else [{"name": t, "partition_indexes": list(ps)} for t, ps in topics.items()]
    )
    return {"groups": [{"group_id": group, "topics": wanted}], "require_stable": False}


def find_coordinator_body(group: str) -> dict[str, Any]:
    """FindCoordinator (v3, one key) of a consumer group's coordinator."""
    return {"key": group, "key_type": 0}
