"""The storage of one data directory: topics, their partition logs, and checkpoints.

::

    DATA_DIR/
      meta.json, .lock, .clean-shutdown      see storage.datadir
      .indexer.lock                          held by the one indexer, see storage.derived.process
      topics/<topic>.json                    one per topic, see storage.topicfiles
      <topic>-<partition>/                   segments, see storage.segment and storage.log
      <topic>-<partition>.<uuid hex>-delete/ a partition being deleted, see storage.deletion
      recovery-point-offset-checkpoint       see storage.logcheckpoints
      log-start-offset-checkpoint
      cleaner-offset-checkpoint              see storage.cleaner
      index-offset-checkpoint                see storage.derived.indexer

A topic exists when its JSON file exists (and does not say ``deleting``): creation writes
the partition directories first and the JSON last (atomically); deletion marks the topic
file, then renames the partition directories to Kafka's marked form before removing
them, so that a crash at any point leaves either the whole topic or directories marked
for deletion. The parts live in modules of their own:

* :mod:`logtrove.storage.catalogue`: the topics by name, the topic files set aside and
  the broker configs their effective configs derive from;
* :mod:`logtrove.storage.openlogs`: the open partition logs, how one is opened, and
  the maintenance round over all of them;
* :mod:`logtrove.storage.topicfiles`: the topic files (:class:`TopicInfo`), and the
  files that are not loaded (:class:`InvalidTopicFile`);
* :mod:`logtrove.storage.creation`: partitions created outside ``Storage._lock`` under
  a reservation, all or none;
* :mod:`logtrove.storage.deletion`: the deletion steps and the marked directories, the
  only ones ever removed;
* :mod:`logtrove.storage.logcheckpoints`: the recovery points and log start offsets,
  read once at opening, written when they changed (by the open logs).

:class:`Storage` holds the lock, the topics and the open logs, and is the one entry
point the rest of logtrove uses.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.storage.broker_configs import BrokerConfigs
from logtrove.storage.catalogue import TopicCatalogue
from logtrove.storage.checkpoint import (
    CLEANER_OFFSET,
    INDEX_OFFSET,
    LOG_START_OFFSET,
    RECOVERY_POINT,
    remove_temp_files,
)
from logtrove.storage.config import SOURCE_CONFIGS, TopicConfig, validate_overrides
from logtrove.storage.creation import Reservations, new_partition_logs
from logtrove.storage.datadir import DataDir
from logtrove.storage.deletion import (
    is_marked_dir_name,
    mark_partition_dirs,
    marked_dir_name,
    marked_dirs,
    remove_marked,
    unlink_topic,
)
from logtrove.storage.errors import (
    FollowedTopicChangeError,
    FollowedTopicError,
    InvalidTopicError,
    ReadOnlyError,
    UnknownPartitionError,
    UnknownTopicError,
    UnsafePartitionError,
)
from logtrove.storage.files import is_out_of_fds, out_of_fds_error
from logtrove.storage.log import PartitionLog, TopicPartition
from logtrove.storage.names import MAX_TOPIC_NAME, check_topic_name
from logtrove.storage.openlogs import OpenLogs, configure
from logtrove.storage.topicfiles import (
    MAX_PARTITIONS,
    TOPICS_DIR,
    InvalidTopicFile,
    TopicInfo,
)

_log = logging.getLogger(__name__)
DEFAULT_MAX_TOTAL_PARTITIONS = 20_000  # over all topics; see README "Limits and safety"
_CHECKPOINTS = (RECOVERY_POINT, LOG_START_OFFSET, CLEANER_OFFSET, INDEX_OFFSET)

__all__ = [
    "MAX_PARTITIONS",
    "MAX_TOPIC_NAME",
    "TOPICS_DIR",
    "InvalidTopicFile",
    "Storage",
    "TopicInfo",
    "check_topic_name",
    "is_marked_dir_name",
    "marked_dir_name",
]


class Storage:
    """Topics and partition logs of one data directory.

    Open with :meth:`open`; a writer opening takes the directory's lock and, after an
    unclean shutdown, recovers every partition's unflushed segments before returning.
    """

    def __init__(
        self,
        data_dir: DataDir,
        *,
        clock: Clock,
        clean_shutdown: bool,
        max_partitions: int = DEFAULT_MAX_TOTAL_PARTITIONS,
    ) -> None:
        self.data_dir = data_dir
        self.path = data_dir.path
        self.clock = clock
        self.read_only = data_dir.read_only
        self.clean_shutdown = clean_shutdown
        self.max_partitions = max_partitions  # total over all topics, checked at creation
        self._lock = threading.RLock()
        self._creations = Reservations(threading.Condition(self._lock))
        self._topics = TopicCatalogue(self.path)
        self._logs = OpenLogs(
            self.path, self._lock, clock=clock, read_only=self.read_only, clean_shutdown=clean_shutdown
        )
        self._closed = False

    @classmethod
    def open(
        cls,
        path: Path | str,
        *,
        read_only: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        holder: str | None = None,
        max_partitions: int = DEFAULT_MAX_TOTAL_PARTITIONS,
    ) -> Storage:
        """Open ``path``; ``max_partitions`` caps the total partition count of later
        creations (a data directory already over it opens, and grows no further)."""
        data_dir = DataDir.open(path, read_only=read_only, holder=holder)
        try:
            clean = data_dir.take_clean_shutdown_marker() if not read_only else True
            storage = cls(data_dir, clock=clock, clean_shutdown=clean, max_partitions=max_partitions)
            storage._topics.load()
            if not read_only:
                (storage.path / TOPICS_DIR).mkdir(exist_ok=True)
                storage._clean_leftovers()
                storage._open_all_logs()
                storage.write_checkpoints()
        except BaseException:
            data_dir.close()
            raise
        return storage

    def _open_all_logs(self) -> None:
        """Open every partition's log; one that is refused as unsafe (a symbolic link,
        :func:`~logtrove.storage.loader.refuse_links`) is logged and left closed, and
        the others open: its reads and writes fail with that error, nothing else does."""
        count = self._topics.total_partitions()
        try:
            for info in self._topics.topics():
                for p in range(info.partitions):
                    try:
                        self.log(info.name, p)
                    except UnsafePartitionError as exc:
                        _log.error("%s", exc)
        except OSError as exc:
            if is_out_of_fds(exc):
                raise out_of_fds_error(exc, f"opening the {count} partitions of {self.path}") from exc
            raise

    # -- topics (storage.catalogue) ------------------------------------------------------
    def invalid_topics(self) -> list[InvalidTopicFile]:
        """Topic files that were not loaded (see :class:`InvalidTopicFile`)."""
        with self._lock:
            return self._topics.invalid_topics()

    def _clean_leftovers(self) -> None:
        """At a writer opening: finish interrupted topic deletions, remove every marked
        partition directory, and the temporary files of interrupted atomic writes."""
        self._topics.finish_deletions()
        remove_marked(marked_dirs(self.path))
        remove_temp_files(self.path / TOPICS_DIR)
        remove_temp_files(self.path, _CHECKPOINTS)

    def topics(self) -> list[TopicInfo]:
        with self._lock:
            return self._topics.topics()

    def has_topic(self, name: str) -> bool:
        return name in self._topics

    def topic(self, name: str) -> TopicInfo:
        return self._topics.topic(name)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        followed_from: str | None = None,
    ) -> TopicInfo:
        """Create a topic; raises :class:`TopicExistsError`, :class:`InvalidTopicError` or
        :class:`~logtrove.storage.errors.InvalidConfigError`. With ``followed_from`` (a
        mirror's topic) only follower appends may write to it (see :meth:`follow_topic`)."""
        self._check_writable()
        check_topic_name(name)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidTopicError(f"partition count must be 1-{MAX_PARTITIONS}, got {partitions}")
        overrides = validate_overrides(dict(configs or {}))
        with self._lock:
            self._creations.wait_idle(name)
            self._topics.check_new_name(name)
            self._reserve(name, partitions)
        try:
            info = self._topics.new_topic(
                name, partitions, overrides, followed_from=followed_from, now_ms=self.clock.now_ms()
            )
            self._topics.check_no_invalid_file(name)
            with self._new_logs(name, range(partitions), info.config) as logs, self._lock:
                for plog in logs.values():
                    configure(plog, info)
                self._topics.put(info)
                self._logs.add(logs)
            return info
        finally:
            self._creations.release(name, partitions)

    def _reserve(self, name: str, count: int) -> None:
        """Claim ``name`` and ``count`` more partitions (under ``_lock``), or raise
        :class:`~logtrove.storage.errors.PartitionLimitError` if the total would pass
        ``max_partitions``."""
        self._creations.reserve(name, count, self._topics.total_partitions(), self.max_partitions)

    def _new_logs(
        self, name: str, partitions: range, config: TopicConfig
    ) -> contextlib.AbstractContextManager[dict[TopicPartition, PartitionLog]]:
        """Directories and open logs for new partitions (:func:`.creation.new_partition_logs`)."""

        return new_partition_logs(self.path, name, partitions, lambda tp: self._logs.open(tp, config))

    def delete_topic(self, name: str) -> uuid.UUID | None:
        """Delete a topic and all its data (in the steps of the module docstring); returns
        its topic id. ``name`` may also name an invalid topic file (see
        :meth:`InvalidTopicFile.matches`). Raises :class:`UnknownTopicError`."""
        self._check_writable()
        with self._lock:
            self._creations.wait_idle(name)
            info = self._topics.find(name)
            if info is None:
                return self._topics.delete_invalid(name)
            self._topics.mark_deleting(info)
            logs = [self._logs.pop(TopicPartition(name, p)) for p in range(info.partitions)]
            for plog in logs:
                if plog is not None:
                    plog.delete_files()
            marked = mark_partition_dirs(self.path, name, info.partitions)
            unlink_topic([], self._topics.file(name))
        remove_marked(marked)
        self.write_checkpoints()
        return info.topic_id

    def alter_topic_configs(
        self,
        name: str,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: list[str] | tuple[str, ...] = (),
        *,
        follower: bool = False,
    ) -> TopicInfo:
        """Set and/or remove config overrides of a topic; returns the new info. Only the
        mirror (``follower``) changes the source configs of a followed topic
        (:meth:`check_client_change`)."""
        self._check_writable()
        with self._lock:
            if not follower:
                self.check_client_change(name, configs=[*(set_configs or {}), *delete_configs])
            new = self._topics.alter_configs(name, set_configs or {}, delete_configs)
            self._configure_logs(new)
            return new

    def _configure_logs(self, info: TopicInfo) -> None:
        """Hand ``info`` (its config, whether it is followed, its leader epoch) to the
        topic's open logs."""
        for p in range(info.partitions):
            log = self._logs.get(TopicPartition(info.name, p))
            if log is not None:
                configure(log, info)

    def broker_configs(self) -> BrokerConfigs:
        """The dynamic broker configs (a copy)."""
        with self._lock:
            return self._topics.broker_configs()

    def alter_broker_configs(
        self,
        level: str,
        set_configs: Mapping[str, str],
        delete_configs: list[str] | tuple[str, ...] = (),
        *,
        replace: bool = False,
        validate_only: bool = False,
    ) -> BrokerConfigs:
        """Change one level (``"cluster"`` or ``"broker"``) of the dynamic broker configs,
        persist them, and re-derive every topic's effective config from the new defaults.
        Raises :class:`~logtrove.storage.errors.InvalidConfigError`."""
        self._check_writable()
        with self._lock:
            new = self._topics.alter_broker_configs(
                level, set_configs, list(delete_configs), replace=replace, validate_only=validate_only
            )
            if not validate_only:
                for info in self._topics.topics():
                    self._configure_logs(self._topics.rederive(info))
            return new

    def follow_topic(self, name: str, source: str | None) -> TopicInfo:
        """Mark a topic as followed from ``source`` (a mirror copies it; clients may only
        read it: :class:`~logtrove.storage.errors.FollowedTopicError`), or with ``None``
        unmark it (promotion: it takes client writes again). Persisted in its topic file."""
        return self._change_topic(name, followed_from=source)

    def set_leader_epoch(self, name: str, epoch: int) -> TopicInfo:
        """Make ``epoch`` the topic's leader epoch (promotion raises it past every epoch
        its logs hold: :mod:`logtrove.storage.epochs`). Persisted in its topic file."""
        return self._change_topic(name, leader_epoch=epoch)

    def _change_topic(self, name: str, **changes: Any) -> TopicInfo:
        """Replace fields of a topic's info (:meth:`TopicCatalogue.change`) and hand it
        to its open logs."""
        self._check_writable()
        with self._lock:
            new = self._topics.change(name, **changes)
            self._configure_logs(new)
            return new

    def check_client_change(
        self, name: str, *, partitions: bool = False, configs: Iterable[str] = ()
    ) -> None:
        """Raise :class:`FollowedTopicChangeError` if ``name`` is a followed topic and the
        change (its partition count, these configs) is one only its source makes: a
        followed topic is read-only to clients for all but its local configs. Creating
        partitions and altering configs check it themselves; a validate-only request
        asks it directly. Deleting a followed topic is allowed: it removes the copy,
        which leaves nothing that differs from the source (a mirror still following it
        copies it again)."""
        info = self.topic(name)
        if info.followed_from is None:
            return
        if partitions:
            raise FollowedTopicChangeError(
                f"topic {name!r} is mirrored from {info.followed_from}: its partitions follow the "
                "source's (add them there, or promote the topic to take client changes)"
            )
        sourced = sorted(set(configs) & SOURCE_CONFIGS)
        if sourced:
            raise FollowedTopicChangeError(
                f"topic {name!r} is mirrored from {info.followed_from}: {', '.join(sourced)} "
                "come from the source (change them there, or promote the topic); only local "
                "configs such as segment.bytes or the index settings may be changed here"
            )

    def create_partitions(self, name: str, total: int, *, follower: bool = False) -> TopicInfo:
        """Grow a topic to ``total`` partitions (never shrink, as in Kafka). Only the
        mirror (``follower``) grows a followed topic (:meth:`check_client_change`)."""
        self._check_writable()
        with self._lock:
            self._creations.wait_idle(name)
            if not follower:
                self.check_client_change(name, partitions=True)
            info = self.topic(name)
            if total <= info.partitions or total > MAX_PARTITIONS:
                raise InvalidTopicError(
                    f"topic {name!r} has {info.partitions} partitions; the new count must be larger "
                    f"and at most {MAX_PARTITIONS}"
                )
            self._reserve(name, total - info.partitions)
        try:
            with self._new_logs(name, range(info.partitions, total), info.config) as logs, self._lock:
                new = self._topics.change(name, partitions=total)  # configs may have changed
                for log in logs.values():
                    configure(log, new)
                self._logs.add(logs)
            return new
        finally:
            self._creations.release(name, total - info.partitions)

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{self.path} is open read-only")

    # -- logs --------------------------------------------------------------------------
    def log(self, topic: str, partition: int) -> PartitionLog:
        """The log of one partition (opened on first use)."""
        tp = TopicPartition(topic, partition)
        log = self._logs.get(tp)
        if log is not None:
            return log
        with self._lock:
            info = self.topic(topic)
            if not 0 <= partition < info.partitions:
                raise UnknownPartitionError(
                    f"topic {topic!r} has partitions 0-{info.partitions - 1}; there is no partition {partition}"
                )
            log = self._logs.get(tp)
            return log if log is not None else self._logs.open_listed(tp, info)

    def logs(self) -> Iterator[PartitionLog]:
        """Every partition log of every topic, opening them as needed (a topic deleted
        meanwhile is skipped)."""
        for info in self.topics():
            for p in range(info.partitions):
                try:
                    plog = self.log(info.name, p)
                except (UnknownTopicError, UnknownPartitionError):
                    break
                except UnsafePartitionError:  # left closed, logged when the storage opened
                    continue
                except FileNotFoundError:  # a reader's view of a topic being deleted
                    if not self.read_only or (self.path / str(TopicPartition(info.name, p))).is_dir():
                        raise
                    break
                yield plog

    # -- maintenance ----------------------------------------------------------------------
    def write_checkpoints(self) -> None:
        """Write the recovery-point and log-start checkpoints if they changed."""
        if not self.read_only:
            self._logs.write_checkpoints()

    def flush_all(self) -> None:
        for log in self._logs.all():
            log.flush()
        self.write_checkpoints()

    def run_maintenance(self) -> dict[str, int]:
        """One round of housekeeping: ``flush.ms`` flushes, retention, purging deleted
        segments, checkpoints. The broker calls it periodically (off the event loop)."""
        if self.read_only:
            return {"flushed": 0, "segments_deleted": 0, "files_purged": 0}
        stats = self._logs.maintain()
        self.write_checkpoints()
        return stats

    def truncate_before(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords for one partition; the new log start offset is checkpointed now.
        A followed topic refuses it (:class:`FollowedTopicError`): its log start is the
        source's (:meth:`follow_log_start`)."""
        if self.topic(topic).followed_from is not None:
            raise FollowedTopicError(
                f"{topic} is a mirror of another cluster's topic: delete records at the source instead"
            )
        start = self.log(topic, partition).truncate_before(offset)
        self.write_checkpoints()
        return start

    def follow_log_start(self, topic: str, partition: int, offset: int) -> int:
        """A follower's log start move (:meth:`PartitionLog.follow_log_start`), checkpointed now."""
        start = self.log(topic, partition).follow_log_start(offset)
        self.write_checkpoints()
        return start

    def refresh(self) -> None:
        """Read-only openings: pick up topics, segments and log start offsets the writer
        changed since this opening. A partition whose directory vanished meanwhile (its
        topic was just deleted) is dropped; the next refresh no longer lists the topic."""
        if not self.read_only:
            return
        with self._lock:
            self._topics.load()
            self._logs.refresh(self._topics)

    def close(self) -> None:
        """Flush everything, write checkpoints and the clean-shutdown marker, unlock."""
        if self._closed:
            return
        self._closed = True
        try:
            for log in self._logs.all():
                log.close()
            if not self.read_only:
                self.write_checkpoints()
                self.data_dir.write_clean_shutdown_marker()
        finally:
            self.data_dir.close()

    def abandon(self) -> None:
        """Release everything as a crash would: no flush, no checkpoints, no clean-shutdown
        marker. For tests that reopen a data directory after a simulated crash."""
        if self._closed:
            return
        self._closed = True
        for log in self._logs.all():
            log.abandon()
        self.data_dir.close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
