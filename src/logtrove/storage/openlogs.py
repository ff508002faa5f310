"""The open partition logs of one data directory (the pool of logs of Kafka's
``LogManager``): how a log is opened, and what is done to all of them at once.

::

    (topic, partition) ──▶ PartitionLog   opened on first use from the recovery point and
                                          log start checkpointed (storage.logcheckpoints)
    each maintenance round                flush.ms flushes, retention, purge of deleted
                                          segments, then the checkpoints
    close                                 flush and close every log, then the checkpoints

A log is given what its topic's info says (:func:`configure`) when it is opened and
whenever the info changes. Not thread-safe for changes: the
:class:`~logtrove.storage.store.Storage` adds and removes logs under its lock, which it
hands in for the checkpoint writer's snapshot; a lookup (:meth:`OpenLogs.get`) reads
the map without it.
"""

from __future__ import annotations

import threading
from collections.abc import Container, Mapping
from pathlib import Path

from logtrove.clock import Clock
from logtrove.storage.config import TopicConfig
from logtrove.storage.log import PartitionLog
from logtrove.storage.logcheckpoints import LogCheckpoints
from logtrove.storage.names import TopicPartition
from logtrove.storage.topicfiles import TopicInfo


def configure(log: PartitionLog, info: TopicInfo) -> None:
    """Give ``log`` what its topic's info says: the config, whether a mirror follows it
    (only follower appends write then), the leader epoch stamped into produced batches."""
    log.config = info.config
    log.follower = info.followed_from is not None
    log.leader_epoch = info.leader_epoch


class OpenLogs:
    """The partition logs of one data directory opened so far (module doc)."""

    def __init__(
        self, path: Path, lock: threading.RLock, *, clock: Clock, read_only: bool, clean_shutdown: bool
    ) -> None:
        self.path = path
        self.clock = clock
        self.read_only = read_only
        self.clean_shutdown = clean_shutdown
        self._lock = lock  # the storage's
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._checkpoints = LogCheckpoints(path)

    # -- the map ------------------------------------------------------------------------
    def get(self, tp: TopicPartition) -> PartitionLog | None:
        return self._logs.get(tp)

    def pop(self, tp: TopicPartition) -> PartitionLog | None:
        return self._logs.pop(tp, None)

    def add(self, logs: Mapping[TopicPartition, PartitionLog]) -> None:
        self._logs.update(logs)

    def all(self) -> list[PartitionLog]:
        """A snapshot of the open logs."""
        return list(self._logs.values())

    # -- opening ------------------------------------------------------------------------
    def open(
        self, tp: TopicPartition, config: TopicConfig, *, recovery_point: int = 0, log_start_offset: int = 0
    ) -> PartitionLog:
        """Open the log of ``tp`` (not listed: :meth:`add` does); the offsets default to
        those of a new partition."""
        return PartitionLog(
            self.path / str(tp),
            tp,
            config,
            clock=self.clock,
            read_only=self.read_only,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=self.clean_shutdown,
        )

    def open_listed(self, tp: TopicPartition, info: TopicInfo) -> PartitionLog:
        """Open and list the log of an existing partition of the topic ``info``, from its
        checkpointed recovery point and log start."""
        recovery_points, log_starts = self._checkpoints.initial()
        key = (tp.topic, tp.partition)
        log = self.open(
            tp,
            info.config,
            recovery_point=recovery_points.get(key, 0),
            log_start_offset=log_starts.get(key, 0),
        )
        configure(log, info)
        self._logs[tp] = log
        return log

    # -- all at once --------------------------------------------------------------------
    def write_checkpoints(self) -> None:
        """Write the recovery-point and log-start checkpoints if they changed."""

        def snapshot() -> list[tuple[TopicPartition, PartitionLog]]:
            with self._lock:
                return list(self._logs.items())

        self._checkpoints.write(snapshot)

    def maintain(self) -> dict[str, int]:
        """``flush.ms`` flushes, retention and purging deleted segments on every log;
        how many of each."""
        stats = {"flushed": 0, "segments_deleted": 0, "files_purged": 0}
        for log in self.all():
            stats["flushed"] += int(log.flush_if_due())
            stats["segments_deleted"] += len(log.apply_retention())
            stats["files_purged"] += log.purge_deleted()
        return stats

    def refresh(self, topics: Container[str]) -> None:
        """A read-only opening's refresh of every log: the logs of a topic not in
        ``topics``, or whose directory vanished (its topic was just deleted), are closed
        and dropped; the others pick up the log starts written since."""
        starts = self._checkpoints.reread_log_starts()
        for tp in list(self._logs):
            if tp.topic not in topics:
                self._logs.pop(tp).close()
                continue
            try:
                self._logs[tp].refresh(starts.get((tp.topic, tp.partition)))
            except FileNotFoundError:
                if self._logs[tp].directory.is_dir():
                    raise
                self._logs.pop(tp).close()
