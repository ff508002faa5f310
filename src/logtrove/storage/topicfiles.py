"""The topic catalogue on disk: one JSON file per topic in ``DATA_DIR/topics/``.

::

    topics/<topic>.json   {"name": "orders", "topic_id": "<uuid>", "partitions": 3,
                           "configs": {"retention.ms": "86400000"},    (overrides only)
                           "created_ms": 1700000000000,
                           "followed_from": "HOST:PORT",              (a mirror's topic only)
                           "leader_epoch": 2,                         (when not 0)
                           "deleting": true}                          (while being deleted)

A topic exists when its file exists and does not say ``deleting``. A file is replaced
whole (:func:`~logtrove.storage.checkpoint.atomic_write`: temp file, fsync, rename), so a
reader sees the old topic or the new one, never half of either.

A topic file whose name breaks Kafka's rule (written by an older version), that does not
parse, or whose name is not its file's, is not loaded: it is kept aside as an
:class:`InvalidTopicFile`, which ``logtrove topics delete`` removes by its name, escaped
name, file stem or topic id.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logtrove.storage.checkpoint import atomic_write
from logtrove.storage.config import TopicConfig, validate_overrides
from logtrove.storage.errors import InvalidTopicError, UnknownTopicError
from logtrove.storage.names import escaped_name, is_legal_topic_name

log = logging.getLogger(__name__)

TOPICS_DIR = "topics"
MAX_PARTITIONS = 10_000  # per topic


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


@dataclass
class TopicFiles:
    """What ``topics/`` holds: the topics by name, the files not loaded by file name,
    and the topics whose deletion a crash interrupted."""

    topics: dict[str, TopicInfo] = field(default_factory=dict)
    invalid: dict[str, InvalidTopicFile] = field(default_factory=dict)
    deleting: list[TopicInfo] = field(default_factory=list)


def topic_file(data_dir: Path, name: str) -> Path:
    return data_dir / TOPICS_DIR / f"{name}.json"


def read_topic_files(data_dir: Path, defaults: Mapping[str, str]) -> TopicFiles:
    """Read ``topics/*.json`` of ``data_dir`` (``defaults``: the broker-level topic
    defaults). A file that vanishes meanwhile (a writer deleting the topic) is gone."""
    found = TopicFiles()
    folder = data_dir / TOPICS_DIR
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    for f in files:
        try:
            data = json.loads(f.read_text("utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            found.invalid[f.name] = InvalidTopicFile(f, f"it cannot be read ({exc})")
            continue
        loaded = _topic_from_file(f, data, defaults)
        if isinstance(loaded, InvalidTopicFile):
            found.invalid[f.name] = loaded
        elif isinstance(data, dict) and data.get("deleting"):
            found.deleting.append(loaded)
        else:
            found.topics[loaded.name] = loaded
    return found


def write_topic_file(data_dir: Path, info: TopicInfo, *, deleting: bool = False) -> None:
    """Replace the topic file of ``info`` (atomically); with ``deleting`` it says so."""
    (data_dir / TOPICS_DIR).mkdir(exist_ok=True)
    data = dict(info.to_json(), deleting=True) if deleting else info.to_json()
    atomic_write(topic_file(data_dir, info.name), (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def report_invalid(files: Iterable[InvalidTopicFile]) -> None:
    """Say in the log that ``files`` are not loaded and how to remove them (once each:
    the caller passes the ones it had not seen)."""
    for bad in files:
        log.warning(
            "topic file %s not loaded: %s; remove it with `logtrove topics delete %s`",
            escaped_name(str(bad.file)),
            bad.reason,
            bad.topic_id or bad.shown,
        )


def find_invalid(invalid: Iterable[InvalidTopicFile], ident: str) -> InvalidTopicFile:
    """The one file of ``invalid`` that ``ident`` names (:meth:`InvalidTopicFile.matches`;
    an exact name or stem wins over escaped forms). Raises :class:`UnknownTopicError`
    when none does, :class:`InvalidTopicError` when several do."""
    found = [bad for bad in invalid if bad.matches(ident)]
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
    return found[0]


def altered_overrides(
    overrides: Mapping[str, str], set_configs: Mapping[str, str], delete_configs: Sequence[str]
) -> dict[str, str]:
    """A topic's ``overrides`` with ``delete_configs`` removed and ``set_configs`` set,
    every name and value checked (:class:`~logtrove.storage.errors.InvalidConfigError`)."""
    altered = dict(overrides)
    defaults = TopicConfig().as_strings()
    for key in delete_configs:
        validate_overrides({key: defaults.get(key, "")})  # rejects unknown names
        altered.pop(key, None)
    altered.update(validate_overrides(dict(set_configs)))
    return altered


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
