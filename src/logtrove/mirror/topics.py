"""The local side of the mirror's topics: each followed topic of the source exists here,
created with the source's partition count and its
:data:`~logtrove.mirror.source.MIRRORED_CONFIGS` (those this storage accepts), marked
followed, grown when the source grows it, its configs kept as the source's. A local
topic of the same name that is not a mirror's is never taken over."""

from __future__ import annotations

import logging

from logtrove.mirror.source import MIRRORED_CONFIGS, SourceTopic
from logtrove.storage import Storage, StorageError
from logtrove.storage.config import validate_overrides

log = logging.getLogger("logtrove.mirror")


class LocalTopics:
    """The mirror's topics in ``storage``, followed from ``source_address``."""

    def __init__(self, storage: Storage, source_address: str) -> None:
        self.storage = storage
        self.source_address = source_address
        self.skipped: set[str] = set()  # local topics that are not a mirror's: never followed
        self.refused: set[tuple[str, str, str]] = set()  # (topic, key, value) reported once

    def ensure(self, name: str, topic: SourceTopic, configs: dict[str, str] | None) -> bool:
        """The local topic exists with at least the source's partitions and its mirrored
        configs (``None``: unknown this time, left as they are); False when a local topic
        of that name is not a mirror's (it is never taken over)."""
        if name in self.skipped:
            return False
        if not self.storage.has_topic(name):
            usable = self.usable(name, configs or {})
            self.storage.create_topic(name, topic.partitions, usable, followed_from=self.source_address)
            log.info("following %s (%d partitions) from %s", name, topic.partitions, self.source_address)
            return True
        info = self.storage.topic(name)
        if info.followed_from is None:
            log.warning(
                "%s exists locally and is not a mirror's topic: it is not followed "
                "(delete it, or leave it out of --topics)",
                name,
            )
            self.skipped.add(name)
            return False
        if info.partitions < topic.partitions:
            self.storage.create_partitions(name, topic.partitions, follower=True)
            log.info("%s grew to %d partitions at the source", name, topic.partitions)
        if configs is not None:
            wanted = self.usable(name, configs)
            have = {k: v for k, v in info.overrides.items() if k in MIRRORED_CONFIGS}
            if have != wanted:
                gone = [k for k in have if k not in wanted]
                self.storage.alter_topic_configs(name, wanted, gone, follower=True)
                log.info("%s: configs changed at the source: %s (removed: %s)", name, wanted, gone or "none")
        return True

    def usable(self, name: str, configs: dict[str, str]) -> dict[str, str]:
        """The configs this storage accepts (each refused one is reported once)."""
        usable: dict[str, str] = {}
        for key, value in configs.items():
            try:
                usable.update(validate_overrides({key: value}))
            except StorageError as exc:
                if (name, key, value) not in self.refused:
                    self.refused.add((name, key, value))
                    log.warning("%s: config %s=%s not copied: %s", name, key, value, exc)
        return usable
