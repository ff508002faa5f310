"""Dynamic broker configs: Kafka's broker-level defaults for topic configs.

Kafka lets an admin set a broker config at runtime for one broker (resource name = its
id) or as the cluster-wide default (resource name ``""``). For a topic config with no
override of its own, the effective value is the broker's, else the cluster default's,
else the built-in default: ``log.retention.ms`` set on the broker is the retention of
every topic that does not set ``retention.ms`` itself. :data:`SYNONYMS` maps each broker
name to the topic config it defaults (Kafka's ``ServerTopicConfigSynonyms``; only those
logtrove has a topic config for).

Any other name is kept as a *custom* config, as Kafka keeps configs it does not know
(plugins read them): stored and described back, with no effect in logtrove. Names that
cannot change at runtime (``broker.id``, ``listeners``…) are refused by the broker layer
before they reach here.

File: ``DATA_DIR/broker-configs.json``, written atomically::

    {"version": 1, "cluster": {"log.retention.ms": "3600000"}, "broker": {}}

A file that does not parse is not loaded (and not overwritten): the broker serves with
built-in defaults and a warning says how to fix it; an entry whose value does not parse
is skipped the same way. Nothing a hand-edited file holds can stop the data directory
from opening.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logtrove.storage.checkpoint import atomic_write, read_state_file
from logtrove.storage.config import CONFIG_BY_NAME, validate_overrides
from logtrove.storage.errors import InvalidConfigError

log = logging.getLogger(__name__)

BROKER_CONFIGS_FILE = "broker-configs.json"
CLUSTER, BROKER = "cluster", "broker"
LEVELS = (CLUSTER, BROKER)
MAX_CUSTOM_CONFIGS = 1000  # custom names kept per level; bounds the file and the describe answers
MAX_VALUE_CHARS = 4096

_KAFKA_SYNONYMS = {
    "log.cleanup.policy": "cleanup.policy",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "compression.type": "compression.type",
}
SYNONYMS: Mapping[str, str] = {b: t for b, t in _KAFKA_SYNONYMS.items() if t in CONFIG_BY_NAME}
TOPIC_TO_BROKER: Mapping[str, str] = {t: b for b, t in SYNONYMS.items()}


@dataclass
class BrokerConfigs:
    """The dynamic broker configs of both levels, Kafka-named strings."""

    cluster: dict[str, str] = field(default_factory=dict)
    broker: dict[str, str] = field(default_factory=dict)
    unreadable: str | None = None  # why the file was not loaded; alterations are refused then

    def level(self, name: str) -> dict[str, str]:
        return self.cluster if name == CLUSTER else self.broker

    def effective(self, name: str) -> tuple[str, str] | None:
        """``(value, level)`` of a broker config set at either level, the broker's first."""
        for level in (BROKER, CLUSTER):
            value = self.level(level).get(name)
            if value is not None:
                return value, level
        return None

    def topic_defaults(self) -> dict[str, str]:
        """Topic-named defaults the broker levels give to topics without an override."""
        out: dict[str, str] = {}
        for level in (CLUSTER, BROKER):
            for name, value in self.level(level).items():
                if name in SYNONYMS:
                    out[SYNONYMS[name]] = value
        return out

    def altered(
        self, level: str, set_configs: Mapping[str, str], deletes: list[str], *, replace: bool
    ) -> BrokerConfigs:
        """A copy with one level changed: ``replace`` (legacy AlterConfigs) drops every
        name not in ``set_configs``. Values of synonyms are validated as their topic
        config's; raises :class:`InvalidConfigError`."""
        if self.unreadable is not None:
            raise InvalidConfigError(self.unreadable)
        current = {} if replace else dict(self.level(level))
        for name in deletes:
            current.pop(name, None)
        for name, value in set_configs.items():
            if not name or len(value) > MAX_VALUE_CHARS:
                raise InvalidConfigError(
                    f"broker config {name!r}: a name and a value of at most {MAX_VALUE_CHARS} characters"
                )
            topic_name = SYNONYMS.get(name)
            current[name] = (
                value if topic_name is None else validate_overrides({topic_name: value})[topic_name]
            )
        if sum(1 for n in current if n not in SYNONYMS) > MAX_CUSTOM_CONFIGS:
            raise InvalidConfigError(f"at most {MAX_CUSTOM_CONFIGS} custom broker configs per level")
        out = BrokerConfigs(dict(self.cluster), dict(self.broker))
        out.level(level).clear()
        out.level(level).update(current)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            CLUSTER: dict(sorted(self.cluster.items())),
            BROKER: dict(sorted(self.broker.items())),
        }


def load_broker_configs(data_dir: Path) -> BrokerConfigs:
    """Read ``broker-configs.json`` (absent: none set); see the module doc for bad files."""
    path = data_dir / BROKER_CONFIGS_FILE
    try:
        data = json.loads(read_state_file(path))
    except FileNotFoundError:
        return BrokerConfigs()
    except (OSError, ValueError) as exc:
        return _unreadable(path, f"it cannot be read ({exc})")
    if not isinstance(data, dict) or not all(isinstance(data.get(level, {}), dict) for level in LEVELS):
        return _unreadable(path, "it is not an object with 'cluster' and 'broker' objects")
    out = BrokerConfigs()
    for level in LEVELS:
        for name, raw in data.get(level, {}).items():
            if not isinstance(raw, str):
                log.warning("%s: %s config %r skipped: its value is not a string", path, level, name)
                continue
            value, topic_name = raw, SYNONYMS.get(name)
            if topic_name is not None:
                try:
                    value = validate_overrides({topic_name: raw})[topic_name]
                except InvalidConfigError as exc:
                    log.warning("%s: %s config %r skipped: %s", path, level, name, exc)
                    continue
            out.level(level)[name] = value
    return out


def save_broker_configs(data_dir: Path, configs: BrokerConfigs) -> None:
    atomic_write(data_dir / BROKER_CONFIGS_FILE, json.dumps(configs.to_json(), indent=1).encode())


def _unreadable(path: Path, reason: str) -> BrokerConfigs:
    message = (
        f"broker config file {path} not loaded: {reason}; built-in defaults are used and broker "
        "configs cannot be altered until it is fixed or removed"
    )
    log.warning("%s", message)
    return BrokerConfigs(unreadable=message)
