"""The topics of one data directory as :class:`~logtrove.storage.store.Storage` knows
them: the in-memory side of the topic files (:mod:`logtrove.storage.topicfiles`).

::

    topics/*.json ──read──▶ TopicCatalogue ── topics    {"orders": TopicInfo, …}
                                           ── invalid   {"Bad!.json": InvalidTopicFile, …}
                                           ── deleting  [TopicInfo, …]  (finished by a writer)
    broker configs ────────▶ effective config of a topic = its overrides
                             over the broker-level defaults over the built-in ones

A change writes the topic file first (atomically) and the map after, so the map never
holds a topic its file does not. Not thread-safe: :class:`~logtrove.storage.store.Storage`
changes it under its lock; a lookup by name reads the map without it.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from logtrove.storage.broker_configs import BrokerConfigs, load_broker_configs, save_broker_configs
from logtrove.storage.config import TopicConfig
from logtrove.storage.deletion import mark_partition_dirs, unlink_topic
from logtrove.storage.errors import InvalidTopicError, TopicExistsError, UnknownTopicError
from logtrove.storage.topicfiles import (
    InvalidTopicFile,
    TopicInfo,
    altered_overrides,
    find_invalid,
    read_topic_files,
    report_invalid,
    topic_file,
    write_topic_file,
)


class TopicCatalogue:
    """Name → :class:`TopicInfo` of one data directory, the files set aside, and the
    dynamic broker configs (module doc)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._broker_configs = BrokerConfigs()
        self._topics: dict[str, TopicInfo] = {}
        self._invalid: dict[str, InvalidTopicFile] = {}
        self._deleting: list[TopicInfo] = []

    def load(self) -> None:
        """Read ``topics/*.json``: valid topics are loaded, topics being deleted set
        aside, anything else reported once and set aside. A file that vanishes meanwhile
        (a writer deleting the topic) is simply gone."""
        self._broker_configs = load_broker_configs(self.path)
        found = read_topic_files(self.path, self._broker_configs.topic_defaults())
        report_invalid(found.invalid[key] for key in found.invalid.keys() - self._invalid.keys())
        self._topics, self._invalid, self._deleting = found.topics, found.invalid, found.deleting

    # -- lookups ------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def topic(self, name: str) -> TopicInfo:
        try:
            return self._topics[name]
        except KeyError:
            raise UnknownTopicError(f"unknown topic {name!r}") from None

    def find(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topics(self) -> list[TopicInfo]:
        """Every topic, by name."""
        return sorted(self._topics.values(), key=lambda t: t.name)

    def invalid_topics(self) -> list[InvalidTopicFile]:
        """Topic files that were not loaded (see :class:`InvalidTopicFile`)."""
        return sorted(self._invalid.values(), key=lambda t: t.file.name)

    def total_partitions(self) -> int:
        return sum(t.partitions for t in self._topics.values())

    def file(self, name: str) -> Path:
        return topic_file(self.path, name)

    # -- checks before a creation ---------------------------------------------------------
    def check_new_name(self, name: str) -> None:
        """Raise :class:`TopicExistsError` when ``name`` is taken, :class:`InvalidTopicError`
        when it differs from a topic's only by '.' against '_' (metrics confuse them)."""
        if name in self._topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        clash = {t for t in self._topics if t.replace(".", "_") == name.replace(".", "_")}
        if clash:
            raise InvalidTopicError(
                f"topic {name!r} collides with {clash.pop()!r} ('.' and '_' are confused by metrics)"
            )

    def check_no_invalid_file(self, name: str) -> None:
        """Raise :class:`TopicExistsError` when a topic file of ``name`` is set aside."""
        if f"{name}.json" in self._invalid:
            raise TopicExistsError(
                f"topic file of {name!r} exists but cannot be loaded; remove it first with "
                f"`logtrove topics delete {name}`"
            )

    # -- changes ------------------------------------------------------------------------
    def new_topic(
        self,
        name: str,
        partitions: int,
        overrides: Mapping[str, str],
        *,
        followed_from: str | None,
        now_ms: int,
    ) -> TopicInfo:
        """The info of a new topic, with a new topic id and its effective config; not
        listed before :meth:`put`."""
        return TopicInfo(
            name=name,
            topic_id=uuid.uuid4(),
            partitions=partitions,
            overrides=overrides,
            created_ms=now_ms,
            config=self.effective_config(overrides),
            followed_from=followed_from,
        )

    def put(self, info: TopicInfo) -> None:
        """Write the topic file of ``info``, then list it."""
        write_topic_file(self.path, info)
        self._topics[info.name] = info

    def change(self, name: str, **changes: Any) -> TopicInfo:
        """The topic ``name`` with the fields ``changes`` of its info replaced, written
        and listed (:meth:`put`). Raises :class:`UnknownTopicError`."""
        new = dataclasses.replace(self.topic(name), **changes)
        self.put(new)
        return new

    def alter_configs(
        self, name: str, set_configs: Mapping[str, str], delete_configs: Sequence[str]
    ) -> TopicInfo:
        """The topic ``name`` with config overrides set and/or removed, and its effective
        config derived again, written and listed."""
        overrides = altered_overrides(self.topic(name).overrides, set_configs, delete_configs)
        return self.change(name, overrides=overrides, config=self.effective_config(overrides))

    def mark_deleting(self, info: TopicInfo) -> None:
        """Mark the topic file as being deleted, then unlist the topic."""
        write_topic_file(self.path, info, deleting=True)
        del self._topics[info.name]

    def finish_deletions(self) -> None:
        """At a writer opening: finish the deletions of the topics found marked."""
        for info in self._deleting:
            unlink_topic(mark_partition_dirs(self.path, info.name, info.partitions), self.file(info.name))
        self._deleting = []

    def delete_invalid(self, ident: str) -> uuid.UUID | None:
        """Remove the topic file set aside that ``ident`` names
        (:meth:`InvalidTopicFile.matches`) with the directories it owns; its topic id."""
        bad = find_invalid(self._invalid.values(), ident)
        owner = bad.name if bad.name is not None else bad.stem
        # a file holding another name's topic owns no directories: those are that name's
        owns_dirs = owner == bad.stem and owner not in self._topics
        marked = mark_partition_dirs(self.path, owner, bad.partitions) if owns_dirs else []
        unlink_topic(marked, bad.file)
        del self._invalid[bad.file.name]
        return bad.topic_id

    # -- configs ------------------------------------------------------------------------
    def effective_config(self, overrides: Mapping[str, str]) -> TopicConfig:
        """A topic's config: its overrides over the broker-level defaults over the built-in ones."""
        return TopicConfig.from_overrides({**self._broker_configs.topic_defaults(), **overrides})

    def broker_configs(self) -> BrokerConfigs:
        """The dynamic broker configs (a copy)."""
        current = self._broker_configs
        return BrokerConfigs(dict(current.cluster), dict(current.broker), current.unreadable)

    def alter_broker_configs(
        self,
        level: str,
        set_configs: Mapping[str, str],
        delete_configs: list[str],
        *,
        replace: bool,
        validate_only: bool,
    ) -> BrokerConfigs:
        """The broker configs with one level changed; unless ``validate_only``, persisted
        and made the defaults of every topic's effective config (the caller hands the new
        configs to the open logs). Raises :class:`~logtrove.storage.errors.InvalidConfigError`."""
        new = self._broker_configs.altered(level, set_configs, delete_configs, replace=replace)
        if not validate_only:
            save_broker_configs(self.path, new)
            self._broker_configs = new
        return new

    def rederive(self, info: TopicInfo) -> TopicInfo:
        """``info`` with its effective config derived again, listed (its file is unchanged:
        the file holds only the overrides)."""
        new = dataclasses.replace(info, config=self.effective_config(info.overrides))
        self._topics[info.name] = new
        return new
