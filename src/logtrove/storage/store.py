"""The storage of one data directory: topics, their partition logs, and checkpoints.

::

    DATA_DIR/
      meta.json, .lock, .clean-shutdown      see storage.datadir
      .indexer.lock                          held by the one indexer, see storage.indexproc
      topics/<topic>.json                    {"name", "topic_id", "partitions", "configs", "created_ms"}
      <topic>-<partition>/                   segments, see storage.segment
      recovery-point-offset-checkpoint       see storage.checkpoint
      log-start-offset-checkpoint

A topic exists when its JSON file exists: creation writes the partition directories
first and the JSON last (atomically), deletion removes the JSON first; leftovers of a
crash in between are ignored or cleaned at the next writer opening.

Creating partitions is file work (a directory and an empty segment each), done outside
``Storage._lock`` so that a thread creating thousands of them (the broker runs creations
in a worker thread) never holds up readers, appends or the maintenance thread; the name
is reserved meanwhile, and the partitions count against ``max_partitions`` (the total
over all topics) from the reservation on. Opening reads each checkpoint file once, not
once per partition.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.storage.checkpoint import LOG_START_OFFSET, RECOVERY_POINT, CheckpointFile, fsync_dir
from logtrove.storage.config import TopicConfig, validate_overrides
from logtrove.storage.datadir import DataDir
from logtrove.storage.errors import (
    InvalidTopicError,
    PartitionLimitError,
    ReadOnlyError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logtrove.storage.files import FILE_POOL, is_out_of_fds, out_of_fds_error
from logtrove.storage.log import PartitionLog, TopicPartition

TOPICS_DIR = "topics"
MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 10_000  # per topic
DEFAULT_MAX_TOTAL_PARTITIONS = 20_000  # over all topics; see README "Limits and safety"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def check_topic_name(name: str) -> None:
    """Kafka's rules: 1-249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    if not name or len(name) > MAX_TOPIC_NAME or name in (".", "..") or not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"invalid topic name {name!r}: use 1-{MAX_TOPIC_NAME} characters from "
            "letters, digits, '.', '_' and '-' (not '.' or '..')"
        )


@dataclass(frozen=True)
class TopicInfo:
    """A topic's metadata: partitions, config overrides and the effective config."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: Mapping[str, str]
    created_ms: int
    config: TopicConfig = field(compare=False)

    @property
    def internal(self) -> bool:
        return self.name.startswith("__")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(self.overrides),
            "created_ms": self.created_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TopicInfo:
        overrides = {str(k): str(v) for k, v in data.get("configs", {}).items()}
        return cls(
            name=str(data["name"]),
            topic_id=uuid.UUID(str(data["topic_id"])),
            partitions=int(data["partitions"]),
            overrides=overrides,
            created_ms=int(data.get("created_ms", 0)),
            config=TopicConfig.from_overrides(overrides),
        )


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
        self._idle = threading.Condition(self._lock)  # notified when a creation ends
        self._busy: set[str] = set()  # topics being created or grown
        self._reserved = 0  # partitions of creations in progress
        self._checkpointed: tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]] | None = None
        self._topics: dict[str, TopicInfo] = {}
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._recovery_points = CheckpointFile(self.path / RECOVERY_POINT)
        self._log_starts = CheckpointFile(self.path / LOG_START_OFFSET)
        self._written: dict[str, dict[tuple[str, int], int]] = {}
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
            storage._load_topics()
            if not read_only:
                (storage.path / TOPICS_DIR).mkdir(exist_ok=True)
                storage._remove_orphans()
                storage._open_all_logs()
                storage.write_checkpoints()
        except BaseException:
            data_dir.close()
            raise
        return storage

    def _open_all_logs(self) -> None:
        count = sum(info.partitions for info in self._topics.values())
        try:
            for info in list(self._topics.values()):
                for p in range(info.partitions):
                    self.log(info.name, p)
        except OSError as exc:
            if is_out_of_fds(exc):
                raise out_of_fds_error(exc, f"opening the {count} partitions of {self.path}") from exc
            raise

    # -- topics -----------------------------------------------------------------------
    def _load_topics(self) -> None:
        topics: dict[str, TopicInfo] = {}
        folder = self.path / TOPICS_DIR
        if folder.is_dir():
            for f in sorted(folder.glob("*.json")):
                try:
                    info = TopicInfo.from_json(json.loads(f.read_text("utf-8")))
                except (OSError, ValueError, KeyError) as exc:
                    raise InvalidTopicError(f"topic file {f} is unreadable: {exc}") from exc
                topics[info.name] = info
        self._topics = topics

    def _remove_orphans(self) -> None:
        """Partition directories of topics that no longer exist (a crash mid-delete)."""
        for entry in self.path.iterdir():
            if not entry.is_dir() or entry.name == TOPICS_DIR or "-" not in entry.name:
                continue
            topic, _, part = entry.name.rpartition("-")
            if part.isdigit() and topic not in self._topics:
                shutil.rmtree(entry, ignore_errors=True)

    def topics(self) -> list[TopicInfo]:
        with self._lock:
            return sorted(self._topics.values(), key=lambda t: t.name)

    def has_topic(self, name: str) -> bool:
        return name in self._topics

    def topic(self, name: str) -> TopicInfo:
        try:
            return self._topics[name]
        except KeyError:
            raise UnknownTopicError(f"unknown topic {name!r}") from None

    def create_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        """Create a topic; raises :class:`TopicExistsError`, :class:`InvalidTopicError` or
        :class:`~logtrove.storage.errors.InvalidConfigError`."""
        self._check_writable()
        check_topic_name(name)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidTopicError(f"partition count must be 1-{MAX_PARTITIONS}, got {partitions}")
        overrides = validate_overrides(dict(configs or {}))
        with self._lock:
            self._wait_idle(name)
            if name in self._topics:
                raise TopicExistsError(f"topic {name!r} already exists")
            clash = {t for t in self._topics if t.replace(".", "_") == name.replace(".", "_")}
            if clash:
                raise InvalidTopicError(
                    f"topic {name!r} collides with {clash.pop()!r} ('.' and '_' are confused by metrics)"
                )
            self._reserve(name, partitions)
        try:
            info = TopicInfo(
                name=name,
                topic_id=uuid.uuid4(),
                partitions=partitions,
                overrides=overrides,
                created_ms=self.clock.now_ms(),
                config=TopicConfig.from_overrides(overrides),
            )
            with self._new_logs(info, range(partitions)) as logs, self._lock:
                self._write_topic_file(info)
                self._topics[name] = info
                self._logs.update(logs)
            return info
        finally:
            self._unreserve(name, partitions)

    def _wait_idle(self, name: str) -> None:
        """Wait (holding ``_lock``) until no creation of ``name`` is in progress."""
        while name in self._busy:
            self._idle.wait()

    def _reserve(self, name: str, count: int) -> None:
        """Claim ``name`` and ``count`` more partitions (under ``_lock``), or raise
        :class:`PartitionLimitError` if the total would pass ``max_partitions``."""
        total = sum(t.partitions for t in self._topics.values()) + self._reserved + count
        if total > self.max_partitions:
            raise PartitionLimitError(
                f"cannot add {count} partition(s) to {name!r}: that makes {total} in all, over the "
                f"limit of {self.max_partitions} (logtrove serve --max-partitions); delete topics or raise it"
            )
        self._busy.add(name)
        self._reserved += count

    def _unreserve(self, name: str, count: int) -> None:
        with self._lock:
            self._busy.discard(name)
            self._reserved -= count
            self._idle.notify_all()

    @contextlib.contextmanager
    def _new_logs(
        self, info: TopicInfo, partitions: Iterable[int]
    ) -> Iterator[dict[TopicPartition, PartitionLog]]:
        """Directories and open logs for new partitions of ``info``, made without
        ``_lock``. If the block (or the making) fails, the logs are closed and the
        directories this call made are removed, so a failed creation leaves nothing;
        running out of descriptors raises :class:`TooManyOpenFilesError`."""
        logs: dict[TopicPartition, PartitionLog] = {}
        made: list[Path] = []
        try:
            for p in partitions:
                tp = TopicPartition(info.name, p)
                directory = self.path / str(tp)
                with contextlib.suppress(FileExistsError):
                    directory.mkdir()
                    made.append(directory)
                logs[tp] = self._open_log(tp, info.config, recovery_point=0, log_start_offset=0)
            yield logs
        except BaseException as exc:
            out_of_fds = is_out_of_fds(exc)
            for log in logs.values():
                log.abandon()
            if out_of_fds:
                FILE_POOL.close_idle()  # removing the directories needs descriptors too
            for directory in made:
                shutil.rmtree(directory, ignore_errors=True)
            if out_of_fds and isinstance(exc, OSError):
                raise out_of_fds_error(exc, f"creating partitions of {info.name!r}") from exc
            raise

    def delete_topic(self, name: str) -> None:
        """Delete a topic and all its data."""
        self._check_writable()
        with self._lock:
            self._wait_idle(name)
            info = self.topic(name)
            (self.path / TOPICS_DIR / f"{name}.json").unlink()
            fsync_dir(self.path / TOPICS_DIR)
            del self._topics[name]
            for p in range(info.partitions):
                log = self._logs.pop(TopicPartition(name, p), None)
                if log is not None:
                    log.delete_files()
                shutil.rmtree(self.path / str(TopicPartition(name, p)), ignore_errors=True)
        self.write_checkpoints()

    def alter_topic_configs(
        self,
        name: str,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: list[str] | tuple[str, ...] = (),
    ) -> TopicInfo:
        """Set and/or remove config overrides of a topic; returns the new info."""
        self._check_writable()
        with self._lock:
            info = self.topic(name)
            overrides = dict(info.overrides)
            defaults = TopicConfig().as_strings()
            for key in delete_configs:
                validate_overrides({key: defaults.get(key, "")})  # rejects unknown names
                overrides.pop(key, None)
            overrides.update(validate_overrides(dict(set_configs or {})))
            new = TopicInfo(
                name=info.name,
                topic_id=info.topic_id,
                partitions=info.partitions,
                overrides=overrides,
                created_ms=info.created_ms,
                config=TopicConfig.from_overrides(overrides),
            )
            self._write_topic_file(new)
            self._topics[name] = new
            for p in range(new.partitions):
                log = self._logs.get(TopicPartition(name, p))
                if log is not None:
                    log.config = new.config
            return new

    def create_partitions(self, name: str, total: int) -> TopicInfo:
        """Grow a topic to ``total`` partitions (never shrink, as in Kafka)."""
        self._check_writable()
        with self._lock:
            self._wait_idle(name)
            info = self.topic(name)
            if total <= info.partitions or total > MAX_PARTITIONS:
                raise InvalidTopicError(
                    f"topic {name!r} has {info.partitions} partitions; the new count must be larger "
                    f"and at most {MAX_PARTITIONS}"
                )
            self._reserve(name, total - info.partitions)
        try:
            with self._new_logs(info, range(info.partitions, total)) as logs, self._lock:
                new = dataclasses.replace(self._topics[name], partitions=total)  # configs may have changed
                self._write_topic_file(new)
                for log in logs.values():
                    log.config = new.config
                self._topics[name] = new
                self._logs.update(logs)
            return new
        finally:
            self._unreserve(name, total - info.partitions)

    def _write_topic_file(self, info: TopicInfo) -> None:
        folder = self.path / TOPICS_DIR
        folder.mkdir(exist_ok=True)
        tmp = folder / f".{info.name}.tmp"  # ≤ 255 bytes even for a 249-character name
        tmp.write_text(json.dumps(info.to_json(), indent=2) + "\n", "utf-8")
        tmp.replace(folder / f"{info.name}.json")
        fsync_dir(folder)

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
            if log is None:
                recovery_points, log_starts = self._checkpoints()
                key = (topic, partition)
                log = self._open_log(
                    tp,
                    info.config,
                    recovery_point=recovery_points.get(key, 0),
                    log_start_offset=log_starts.get(key, 0),
                )
                self._logs[tp] = log
            return log

    def _open_log(
        self, tp: TopicPartition, config: TopicConfig, *, recovery_point: int, log_start_offset: int
    ) -> PartitionLog:
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

    def _checkpoints(self) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        """(recovery points, log start offsets) as the checkpoint files held them when
        this opening first needed them, read once, not once per partition (opening
        N partitions stays linear in N); a reader's :meth:`refresh` reads them again.
        A writer needs them only for the partitions that exist when it opens: it alone
        writes the files afterwards, and opens its new partitions at offset 0."""
        if self._checkpointed is None:
            self._checkpointed = (self._recovery_points.read(), self._log_starts.read())
        return self._checkpointed

    def logs(self) -> Iterator[PartitionLog]:
        """Every partition log of every topic, opening them as needed."""
        for info in self.topics():
            for p in range(info.partitions):
                yield self.log(info.name, p)

    # -- maintenance ----------------------------------------------------------------------
    def write_checkpoints(self) -> None:
        """Write the recovery-point and log-start checkpoints if they changed."""
        if self.read_only:
            return
        with self._lock:
            logs = list(self._logs.items())
        for name, checkpoint, attr in (
            (RECOVERY_POINT, self._recovery_points, "recovery_point"),
            (LOG_START_OFFSET, self._log_starts, "log_start_offset"),
        ):
            values = {(tp.topic, tp.partition): int(getattr(log, attr)) for tp, log in logs}
            if self._written.get(name) != values:
                checkpoint.write(values)
                self._written[name] = values

    def flush_all(self) -> None:
        for log in list(self._logs.values()):
            log.flush()
        self.write_checkpoints()

    def run_maintenance(self) -> dict[str, int]:
        """One round of housekeeping: ``flush.ms`` flushes, retention, purging deleted
        segments, checkpoints. The broker calls it periodically (off the event loop)."""
        stats = {"flushed": 0, "segments_deleted": 0, "files_purged": 0}
        if self.read_only:
            return stats
        for log in list(self._logs.values()):
            stats["flushed"] += int(log.flush_if_due())
            stats["segments_deleted"] += len(log.apply_retention())
            stats["files_purged"] += log.purge_deleted()
        self.write_checkpoints()
        return stats

    def truncate_before(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords for one partition; the new log start offset is checkpointed now."""
        start = self.log(topic, partition).truncate_before(offset)
        self.write_checkpoints()
        return start

    def refresh(self) -> None:
        """Read-only openings: pick up topics, segments and log start offsets the writer
        changed since this opening."""
        if not self.read_only:
            return
        with self._lock:
            self._load_topics()
            starts = self._log_starts.read()
            self._checkpointed = (self._checkpointed[0] if self._checkpointed else {}, starts)
            for tp in list(self._logs):
                if tp.topic not in self._topics:
                    self._logs.pop(tp).close()
                else:
                    self._logs[tp].refresh(starts.get((tp.topic, tp.partition)))

    def close(self) -> None:
        """Flush everything, write checkpoints and the clean-shutdown marker, unlock."""
        if self._closed:
            return
        self._closed = True
        try:
            for log in list(self._logs.values()):
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
        for log in list(self._logs.values()):
            log.abandon()
        self.data_dir.close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
