"""What only the broker's files know (tag counts, indexed offsets): from its data
directory, opened read-only beside it when the broker runs on this machine, or from its
HTTP API."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from logtrove.client.admin import cluster_id
from logtrove.client.http import HttpApi
from logtrove.client.kafka import KafkaClient
from logtrove.groups.lag import TagMatches, count_tags
from logtrove.groups.tags import TagFilter
from logtrove.storage import Storage, StorageError, recorded_index_offsets
from logtrove.storage.txnview import committed_view


def open_brokers_data(data: Path, cluster: str | None) -> Storage | None:
    """``data`` opened read-only if it is the data directory of the broker of ``cluster``
    (that broker runs on this machine), else ``None``."""
    if not (data / "meta.json").is_file():
        return None
    storage = Storage.open(data, read_only=True)
    if storage.data_dir.cluster_id == cluster:
        return storage
    storage.close()
    return None


def indexed_offsets(
    client: KafkaClient, topic: str, data: Path, http_url: str, *, local: bool = True
) -> dict[int, int | None]:
    """Per partition of ``topic``, how far the broker's indexer got (its checkpoint;
    ``None`` where it has not recorded the partition): from ``data`` when ``local`` and it
    is that broker's data directory, else from its HTTP API at ``http_url``. Raises
    :class:`~logtrove.client.errors.HttpApiError` when the API cannot answer."""
    cluster = cluster_id(client)
    if local:
        try:
            storage = open_brokers_data(data, cluster)
        except StorageError:
            storage = None
        if storage is not None:
            with storage:
                recorded = recorded_index_offsets(storage.path)
            return {p: offset for (name, p), offset in recorded.items() if name == topic}
    api = HttpApi(http_url, cluster_id=cluster)
    detail = api.get(f"/api/v1/topics/{urllib.parse.quote(topic, safe='')}", {})
    return {int(row["partition"]): row.get("indexed_offset") for row in detail.get("partition_list", [])}


class StorageTagCounter:
    """:class:`~logtrove.client.lag.TagCounter` from ``.tagidx`` of the broker's data
    directory, opened read-only here."""

    def __init__(self, storage: Storage, *, read_committed: bool = True) -> None:
        self.storage = storage
        self.read_committed = read_committed

    def count(self, topic: str, partition: int, tags: TagFilter, start: int, end: int) -> TagMatches | None:
        try:
            log = self.storage.log(topic, partition)
            view = committed_view(log) if self.read_committed else None
            return count_tags(log, tags, start, end, view)
        except StorageError:
            return None
