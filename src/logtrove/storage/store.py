"""The storage of one data directory: topics, their partition logs, and checkpoints.

::

    DATA_DIR/
      meta.json, .lock, .clean-shutdown      see storage.datadir
      .indexer.lock                          held by the one indexer, see storage.indexproc
      topics/<topic>.json                    {"name", "topic_id", "partitions", "configs", "created_ms"}
                                             (+ "deleting": true while the topic is deleted)
      <topic>-<partition>/                   segments, see storage.segment
      <topic>-<partition>.<uuid hex>-delete/ a partition being deleted (only these are removed)
      recovery-point-offset-checkpoint       see storage.checkpoint
      log-start-offset-checkpoint

A topic exists when its JSON file exists (and does not say ``deleting``): creation writes the partition directories
first and the JSON last (atomically). Deletion, so that a crash at any point leaves
either the whole topic or directories marked for deletion:

1. the topic file is rewritten with ``"deleting": true`` (atomically): from here on the
   topic is gone for every reader, and the next writer opening finishes the deletion;
2. each partition directory is renamed to Kafka's marked form
   ``<topic>-<partition>.<uuid hex>-delete`` (the topic cut so the name fits 255 bytes);
3. the topic file is removed;
4. the marked directories are removed (and, at every writer opening, any left over).

Only marked directories are ever removed: a folder logtrove did not create and mark (a
user's ``photos-2023/``) is never touched, whatever its name.

A topic file whose name breaks Kafka's rule (written by an older version), that does
not parse, or whose name is not its file's, is not loaded: everything else is, the file
is reported in the log and by :meth:`Storage.invalid_topics`, and
:meth:`Storage.delete_topic` removes it by its name, escaped name, file stem or topic id.

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
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.storage.broker_configs import BrokerConfigs, load_broker_configs, save_broker_configs
from logtrove.storage.checkpoint import (
    CLEANER_OFFSET,
    INDEX_OFFSET,
    LOG_START_OFFSET,
    RECOVERY_POINT,
    CheckpointFile,
    atomic_write,
    fsync_dir,
    remove_temp_files,
)
from logtrove.storage.config import TopicConfig, validate_overrides
from logtrove.storage.datadir import DataDir
from logtrove.storage.errors import (
    FollowedTopicError,
    InvalidTopicError,
    PartitionLimitError,
    ReadOnlyError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logtrove.storage.files import FILE_POOL, is_out_of_fds, out_of_fds_error
from logtrove.storage.log import PartitionLog, TopicPartition
from logtrove.storage.names import MAX_TOPIC_NAME, check_topic_name, escaped_name, is_legal_topic_name

log = logging.getLogger(__name__)

TOPICS_DIR = "topics"
MAX_PARTITIONS = 10_000  # per topic
DEFAULT_MAX_TOTAL_PARTITIONS = 20_000  # over all topics; see README "Limits and safety"
DELETE_DIR_SUFFIX = "-delete"
_MARKED_DIR = re.compile(r".+-[0-9]+\.[0-9a-f]{32}" + DELETE_DIR_SUFFIX, re.DOTALL)
_CHECKPOINTS = (RECOVERY_POINT, LOG_START_OFFSET, CLEANER_OFFSET, INDEX_OFFSET)

__all__ = ["MAX_TOPIC_NAME", "InvalidTopicFile", "Storage", "TopicInfo", "check_topic_name"]


def marked_dir_name(topic: str, partition: int) -> str:
    """Kafka's name for a partition directory being deleted:
    ``<topic>-<partition>.<uuid hex>-delete``, the topic cut so that it fits 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    prefix = topic
    while len(os.fsencode(prefix + suffix)) > 255:
        prefix = prefix[:-1]
    return prefix + suffix


def is_marked_dir_name(name: str) -> bool:
    """True for the names :func:`marked_dir_name` gives, the only directories logtrove removes."""
    return _MARKED_DIR.fullmatch(name) is not None


@dataclass(frozen=True)
class InvalidTopicFile:
    """A topic file that is not loaded: an illegal name (an older version wrote it), a
    file that does not parse, or a name that is not the file's. ``name``, ``topic_id``
    and ``partitions`` are None when the file does not say."""

    file: Path
    reason: str
    name: str | None = None
    topic_id: uuid.UUID | None = None
    partitions: int | None = None

    @property
    def stem(self) -> str:
        return self.file.name.removesuffix(".json")

    @property
    def shown(self) -> str:
        """The name as one printable line (see :func:`~.names.escaped_name`)."""
        return escaped_name(self.name if self.name is not None else self.stem)

    def matches(self, ident: str) -> bool:
        """Whether ``ident`` names it: its name, escaped name, file stem or topic id."""
        names = {self.stem, escaped_name(self.stem)}
        if self.name is not None:
            names |= {self.name, escaped_name(self.name)}
        return ident in names or (self.topic_id is not None and ident == str(self.topic_id))


@dataclass(frozen=True)
class TopicInfo:
    """A topic's metadata: partitions, config overrides and the effective config."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: Mapping[str, str]
    created_ms: int
    config: TopicConfig = field(compare=False)
    followed_from: str | None = None  # the source a mirror copies it from; read-only to clients
    leader_epoch: int = 0  # stamped into produced batches; raised by promotion (storage.epochs)

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
        } | (
            ({"followed_from": self.followed_from} if self.followed_from is not None else {})
            | ({"leader_epoch": self.leader_epoch} if self.leader_epoch else {})
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any], defaults: Mapping[str, str] | None = None) -> TopicInfo:
        """``defaults``: the broker-level topic defaults (:mod:`~logtrove.storage.broker_configs`)."""
        overrides = {str(k): str(v) for k, v in data.get("configs", {}).items()}
        return cls(
            name=str(data["name"]),
            topic_id=uuid.UUID(str(data["topic_id"])),
            partitions=int(data["partitions"]),
            overrides=overrides,
            created_ms=int(data.get("created_ms", 0)),
            config=TopicConfig.from_overrides({**(defaults or {}), **overrides}),
            followed_from=None if data.get("followed_from") is None else str(data["followed_from"]),
            leader_epoch=max(0, int(data.get("leader_epoch", 0))),
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
        self._broker_configs = BrokerConfigs()
        self._topics: dict[str, TopicInfo] = {}
        self._invalid: dict[str, InvalidTopicFile] = {}
        self._deleting: list[TopicInfo] = []
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._recovery_points = CheckpointFile(self.path / RECOVERY_POINT)
        self._log_starts = CheckpointFile(self.path / LOG_START_OFFSET)
        self._written: dict[str, dict[tuple[str, int], int]] = {}
        self._checkpoint_lock = threading.Lock()  # one checkpoint writer at a time
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
                storage._clean_leftovers()
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
        """Read ``topics/*.json``: valid topics are loaded, topics being deleted set
        aside, anything else reported once and set aside. A file that vanishes meanwhile
        (a writer deleting the topic) is simply gone."""
        topics: dict[str, TopicInfo] = {}
        invalid: dict[str, InvalidTopicFile] = {}
        deleting: list[TopicInfo] = []
        self._broker_configs = load_broker_configs(self.path)
        defaults = self._broker_configs.topic_defaults()
        folder = self.path / TOPICS_DIR
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        for f in files:
            try:
                data = json.loads(f.read_text("utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                invalid[f.name] = InvalidTopicFile(f, f"it cannot be read ({exc})")
                continue
            loaded = _topic_from_file(f, data, defaults)
            if isinstance(loaded, InvalidTopicFile):
                invalid[f.name] = loaded
            elif isinstance(data, dict) and data.get("deleting"):
                deleting.append(loaded)
            else:
                topics[loaded.name] = loaded
        for key in invalid.keys() - self._invalid.keys():
            bad = invalid[key]
            log.warning(
                "topic file %s not loaded: %s; remove it with `logtrove topics delete %s`",
                escaped_name(str(bad.file)),
                bad.reason,
                bad.topic_id or bad.shown,
            )
        self._topics, self._invalid, self._deleting = topics, invalid, deleting

    def invalid_topics(self) -> list[InvalidTopicFile]:
        """Topic files that were not loaded (see :class:`InvalidTopicFile`)."""
        with self._lock:
            return sorted(self._invalid.values(), key=lambda t: t.file.name)

    def _clean_leftovers(self) -> None:
        """At a writer opening: finish interrupted topic deletions, remove every marked
        partition directory, and the temporary files of interrupted atomic writes."""
        for info in self._deleting:
            self._unlink_topic(
                self._mark_partition_dirs(info.name, info.partitions), self._topic_file(info.name)
            )
        self._deleting = []
        with os.scandir(self.path) as entries:
            marked = [
                Path(e.path)
                for e in entries
                if e.is_dir(follow_symlinks=False) and is_marked_dir_name(e.name)
            ]
        _remove_marked(marked)
        remove_temp_files(self.path / TOPICS_DIR)
        remove_temp_files(self.path, _CHECKPOINTS)

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
                config=self._effective_config(overrides),
                followed_from=followed_from,
            )
            if f"{name}.json" in self._invalid:
                raise TopicExistsError(
                    f"topic file of {name!r} exists but cannot be loaded; remove it first with "
                    f"`logtrove topics delete {name}`"
                )
            with self._new_logs(info, range(partitions)) as logs, self._lock:
                for plog in logs.values():
                    plog.follower = followed_from is not None
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
    def _new_logs(self, info: TopicInfo, partitions: range) -> Iterator[dict[TopicPartition, PartitionLog]]:
        """Directories and open logs for new partitions of ``info``, made without
        ``_lock``. If the block (or the making) fails, the logs are closed and the
        directories this call made are removed, so a failed creation leaves nothing;
        running out of descriptors raises :class:`TooManyOpenFilesError`."""
        logs: dict[TopicPartition, PartitionLog] = {}
        made: list[Path] = []
        self._refuse_used_dirs(info.name, partitions)
        try:
            for p in partitions:
                tp = TopicPartition(info.name, p)
                directory = self.path / str(tp)
                with contextlib.suppress(FileExistsError):
                    directory.mkdir()
                    made.append(directory)
                logs[tp] = self._open_log(tp, info.config, recovery_point=0, log_start_offset=0)
            fsync_dir(self.path)  # the new directories are durable before the topic file names them
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

    def delete_topic(self, name: str) -> uuid.UUID | None:
        """Delete a topic and all its data (in the steps of the module docstring); returns
        its topic id. ``name`` may also name an invalid topic file (see
        :meth:`InvalidTopicFile.matches`). Raises :class:`UnknownTopicError`."""
        self._check_writable()
        with self._lock:
            self._wait_idle(name)
            info = self._topics.get(name)
            if info is None:
                return self._delete_invalid(name)
            self._write_topic_file(info, deleting=True)
            del self._topics[name]
            logs = [self._logs.pop(TopicPartition(name, p), None) for p in range(info.partitions)]
            for plog in logs:
                if plog is not None:
                    plog.delete_files()
            marked = self._mark_partition_dirs(name, info.partitions)
            self._unlink_topic([], self._topic_file(name))
        _remove_marked(marked)
        self.write_checkpoints()
        return info.topic_id

    def _delete_invalid(self, ident: str) -> uuid.UUID | None:
        found = [bad for bad in self._invalid.values() if bad.matches(ident)]
        exact = [bad for bad in found if ident in (bad.name, bad.stem)]
        if len(found) > 1 and len(exact) == 1:
            found = exact
        if not found:
            raise UnknownTopicError(f"unknown topic {ident!r}")
        if len(found) > 1:
            raise InvalidTopicError(
                f"{ident!r} names several invalid topic files ({', '.join(b.file.name for b in found)}); "
                "give the topic id"
            )
        bad = found[0]
        owner = bad.name if bad.name is not None else bad.stem
        # a file holding another name's topic owns no directories: those are that name's
        owns_dirs = owner == bad.stem and owner not in self._topics
        marked = self._mark_partition_dirs(owner, bad.partitions) if owns_dirs else []
        self._unlink_topic(marked, bad.file)
        del self._invalid[bad.file.name]
        return bad.topic_id

    def _topic_file(self, name: str) -> Path:
        return self.path / TOPICS_DIR / f"{name}.json"

    def _mark_partition_dirs(self, topic: str, partitions: int | None) -> list[Path]:
        """Rename the partition directories of ``topic`` to their marked form; with
        ``partitions`` None (a topic file that does not say), every ``<topic>-<digits>``
        directory. Only real directories directly in the data directory are renamed."""
        wanted = None if partitions is None else {f"{topic}-{p}" for p in range(partitions)}
        marked: list[Path] = []
        with os.scandir(self.path) as entries:
            for entry in entries:
                head, _, tail = entry.name.rpartition("-")
                if wanted is not None and entry.name not in wanted:
                    continue
                if wanted is None and not (head == topic and tail.isdecimal()):
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    continue
                target = self.path / marked_dir_name(topic, int(tail))
                Path(entry.path).rename(target)
                marked.append(target)
        if marked:
            fsync_dir(self.path)
        return marked

    def _unlink_topic(self, marked: list[Path], topic_file: Path) -> None:
        """Remove a topic file whose partition directories are marked, then those."""
        topic_file.unlink(missing_ok=True)
        fsync_dir(topic_file.parent)
        _remove_marked(marked)

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
                config=self._effective_config(overrides),
                followed_from=info.followed_from,
                leader_epoch=info.leader_epoch,
            )
            self._write_topic_file(new)
            self._set_info(new)
            return new

    def _effective_config(self, overrides: Mapping[str, str]) -> TopicConfig:
        """A topic's config: its overrides over the broker-level defaults over the built-in ones."""
        return TopicConfig.from_overrides({**self._broker_configs.topic_defaults(), **overrides})

    def _set_info(self, info: TopicInfo) -> None:
        self._topics[info.name] = info
        for p in range(info.partitions):
            log = self._logs.get(TopicPartition(info.name, p))
            if log is not None:
                log.config = info.config

    def broker_configs(self) -> BrokerConfigs:
        """The dynamic broker configs (a copy)."""
        with self._lock:
            current = self._broker_configs
            return BrokerConfigs(dict(current.cluster), dict(current.broker), current.unreadable)

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
            new = self._broker_configs.altered(level, set_configs, list(delete_configs), replace=replace)
            if validate_only:
                return new
            save_broker_configs(self.path, new)
            self._broker_configs = new
            for info in list(self._topics.values()):
                self._set_info(dataclasses.replace(info, config=self._effective_config(info.overrides)))
            return new

    def follow_topic(self, name: str, source: str | None) -> TopicInfo:
        """Mark a topic as followed from ``source`` (a mirror copies it; clients may only
        read it: :class:`~logtrove.storage.errors.FollowedTopicError`), or with ``None``
        unmark it (promotion: it takes client writes again). Persisted in its topic file."""
        self._check_writable()
        with self._lock:
            new = dataclasses.replace(self.topic(name), followed_from=source)
            self._write_topic_file(new)
            self._topics[name] = new
            for p in range(new.partitions):
                plog = self._logs.get(TopicPartition(name, p))
                if plog is not None:
                    plog.follower = source is not None
            return new

    def set_leader_epoch(self, name: str, epoch: int) -> TopicInfo:
        """Make ``epoch`` the topic's leader epoch (promotion raises it past every epoch
        its logs hold: :mod:`logtrove.storage.epochs`). Persisted in its topic file."""
        self._check_writable()
        with self._lock:
            new = dataclasses.replace(self.topic(name), leader_epoch=epoch)
            self._write_topic_file(new)
            self._topics[name] = new
            for p in range(new.partitions):
                plog = self._logs.get(TopicPartition(name, p))
                if plog is not None:
                    plog.leader_epoch = epoch
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
                    log.follower = new.followed_from is not None
                    log.leader_epoch = new.leader_epoch
                self._topics[name] = new
                self._logs.update(logs)
            return new
        finally:
            self._unreserve(name, total - info.partitions)

    def _refuse_used_dirs(self, name: str, partitions: range) -> None:
        """An existing empty partition directory is a crash's leftover and is taken; one
        with files in it was not made for this topic (an older version's, or restored by
        hand) and is refused, so that a new topic never takes on old records."""
        for p in partitions:
            d = self.path / str(TopicPartition(name, p))
            if d.is_dir() and any(d.iterdir()):
                raise TopicExistsError(
                    f"{d} already holds files but no topic owns it; move it out of the data "
                    f"directory (or restore topics/{name}.json) before creating {name!r}"
                )

    def _write_topic_file(self, info: TopicInfo, *, deleting: bool = False) -> None:
        (self.path / TOPICS_DIR).mkdir(exist_ok=True)
        data = dict(info.to_json(), deleting=True) if deleting else info.to_json()
        atomic_write(self._topic_file(info.name), (json.dumps(data, indent=2) + "\n").encode("utf-8"))

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
                log.follower = info.followed_from is not None
                log.leader_epoch = info.leader_epoch
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
        """Every partition log of every topic, opening them as needed (a topic deleted
        meanwhile is skipped)."""
        for info in self.topics():
            for p in range(info.partitions):
                try:
                    plog = self.log(info.name, p)
                except (UnknownTopicError, UnknownPartitionError):
                    break
                except FileNotFoundError:  # a reader's view of a topic being deleted
                    if not self.read_only or (self.path / str(TopicPartition(info.name, p))).is_dir():
                        raise
                    break
                yield plog

    # -- maintenance ----------------------------------------------------------------------
    def write_checkpoints(self) -> None:
        """Write the recovery-point and log-start checkpoints if they changed."""
        if self.read_only:
            return
        with self._checkpoint_lock:  # the last to look at the logs is the last to write
            with self._lock:
                logs = list(self._logs.items())
            for name, checkpoint, attr in (
                (RECOVERY_POINT, self._recovery_points, "recovery_point"),
                (LOG_START_OFFSET, self._log_starts, "log_start_offset"),
            ):
                values = {(tp.topic, tp.partition): int(getattr(plog, attr)) for tp, plog in logs}
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
            self._load_topics()
            starts = self._log_starts.read()
            self._checkpointed = (self._checkpointed[0] if self._checkpointed else {}, starts)
            for tp in list(self._logs):
                if tp.topic not in self._topics:
                    self._logs.pop(tp).close()
                    continue
                try:
                    self._logs[tp].refresh(starts.get((tp.topic, tp.partition)))
                except FileNotFoundError:
                    if self._logs[tp].directory.is_dir():
                        raise
                    self._logs.pop(tp).close()

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


def _topic_from_file(path: Path, data: Any, defaults: Mapping[str, str]) -> TopicInfo | InvalidTopicFile:
    """The topic a topic file holds, or why it cannot be loaded."""
    try:
        info = TopicInfo.from_json(data, defaults)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return InvalidTopicFile(path, f"it does not parse ({exc!r})")
    if not is_legal_topic_name(info.name):
        reason = f"the topic name {escaped_name(info.name)!r} breaks Kafka's rule ([a-zA-Z0-9._-], 1-249)"
    elif not 1 <= info.partitions <= MAX_PARTITIONS:
        reason = f"its partition count {info.partitions} is not 1-{MAX_PARTITIONS}"
    elif path.name != f"{info.name}.json":
        reason = f"it holds topic {info.name!r}, not {path.name.removesuffix('.json')!r}"
    else:
        return info
    return InvalidTopicFile(path, reason, info.name, info.topic_id, info.partitions)


def _remove_marked(paths: list[Path]) -> None:
    """Remove partition directories marked for deletion (and nothing else)."""
    for path in paths:
        if not is_marked_dir_name(path.name):
            raise ValueError(f"{path} is not marked for deletion")
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            log.warning("could not remove %s entirely; the next writer opening retries", path)
