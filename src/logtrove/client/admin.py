"""Topics through a running broker: Metadata, ListOffsets, CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs and IncrementalAlterConfigs, one request each.

Each request is written once, here (its body in :mod:`logtrove.wire.requests` where
other clients send it too); the CLI's ``--bootstrap`` mode, the lag and tag clients and
the tests call these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from logtrove.client.errors import KafkaProtocolError, check
from logtrove.client.kafka import KafkaClient
from logtrove.wire import (
    TOPIC_RESOURCE,
    ApiKey,
    create_topics_body,
    describe_configs_body,
    list_offsets_body,
    metadata_body,
)

SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
TOPIC_CONFIG_SOURCE = 1  # DescribeConfigs: a value set on the topic (DYNAMIC_TOPIC_CONFIG)
ADMIN_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One config of a topic, as DescribeConfigs answers it."""

    name: str
    value: str | None
    set_on_topic: bool  # False: the broker's default


def metadata(client: KafkaClient, topics: Iterable[str] | None) -> Any:
    """Metadata v12 of ``topics`` (``None``: every topic); creates nothing."""
    return client.request(ApiKey.METADATA, 12, metadata_body(topics))


def cluster_id(client: KafkaClient) -> str | None:
    """The cluster ID of the broker ``client`` is connected to."""
    return metadata(client, []).cluster_id  # type: ignore[no-any-return]


def topic_partitions(client: KafkaClient, topic: str) -> int | None:
    """The partition count of ``topic``, or ``None`` if it does not exist."""
    found = metadata(client, [topic]).topics[0]
    return None if int(found.error_code) else len(found.partitions)


def list_offsets(
    client: KafkaClient,
    topic: str,
    partitions: Iterable[int],
    timestamp: int,
    *,
    read_committed: bool = False,
) -> dict[int, int]:
    """ListOffsets v7 of ``timestamp`` (or EARLIEST / LATEST; LATEST is the last stable
    offset with ``read_committed``) per partition."""
    body = list_offsets_body(topic, partitions, timestamp, read_committed=read_committed)
    parts = client.request(ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions
    for p in parts:
        check(p.error_code, None, f"list offsets of {topic}-{p.partition_index}")
    return {int(p.partition_index): int(p.offset) for p in parts}


def create_topic(
    client: KafkaClient, name: str, partitions: int, configs: Mapping[str, str] | None = None
) -> Any:
    """CreateTopics v7 of one topic; returns its result (``topic_id`` among others)."""
    result = client.request(ApiKey.CREATE_TOPICS, 7, create_topics_body(name, partitions, configs)).topics[0]
    check(result.error_code, result.error_message, f"create {name}")
    return result


def ensure_topic(client: KafkaClient, topic: str, partitions: int) -> tuple[int, bool]:
    """The topic's partition count, creating it with ``partitions`` if it is missing; and
    whether it was created."""
    found = topic_partitions(client, topic)
    if found is not None:
        return found, False
    create_topic(client, topic, partitions)
    return partitions, True


def delete_topic(client: KafkaClient, name: str) -> None:
    body = {"topic_names": [name], "timeout": ADMIN_TIMEOUT_MS}
    result = client.request(ApiKey.DELETE_TOPICS, 5, body).responses[0]
    check(result.error_code, result.error_message, f"delete {name}")


def grow_partitions(client: KafkaClient, name: str, count: int) -> None:
    """CreatePartitions: ``name`` gets ``count`` partitions in all."""
    body = {"topics": [{"name": name, "count": count, "assignments": None}], "timeout": ADMIN_TIMEOUT_MS}
    result = client.request(ApiKey.CREATE_PARTITIONS, 3, body).results[0]
    check(result.error_code, result.error_message, f"grow {name}")


def topic_configs(client: KafkaClient, name: str) -> list[TopicConfig]:
    """Every config of ``name`` (DescribeConfigs v4)."""
    result = client.request(ApiKey.DESCRIBE_CONFIGS, 4, describe_configs_body([name])).results[0]
    check(result.error_code, result.error_message, f"describe {name}")
    return [TopicConfig(c.name, c.value, c.config_source == TOPIC_CONFIG_SOURCE) for c in result.configs]


def alter_topic_configs(
    client: KafkaClient, name: str, sets: Mapping[str, str], deletes: Iterable[str] = ()
) -> None:
    """IncrementalAlterConfigs v1: set ``sets``, return ``deletes`` to their defaults."""
    configs = [{"name": k, "config_operation": SET, "value": v} for k, v in sets.items()]
    configs += [{"name": k, "config_operation": DELETE, "value": None} for k in deletes]
    body: dict[str, Any] = {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": configs}]
    }
    result = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]
    check(result.error_code, result.error_message, f"alter {name}")


def require_partitions(client: KafkaClient, topic: str) -> int:
    """The partition count of ``topic``; raises :class:`KafkaProtocolError` if unknown."""
    n = topic_partitions(client, topic)
    if n is None:
        raise KafkaProtocolError(f"unknown topic {topic!r}")
    return n
