"""The broker's data directory, when the broker runs on this machine: opened read-only
beside it for what only its files know (tag counts, indexed offsets)."""

from __future__ import annotations

from pathlib import Path

from logtrove.groups.lag import TagMatches, count_tags
from logtrove.groups.tags import TagFilter
from logtrove.storage import Storage, StorageError
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
