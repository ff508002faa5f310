"""Topic configuration: names, types, defaults and validation.

Names and defaults follow Kafka's topic configs where Kafka has one, so that
DescribeConfigs / IncrementalAlterConfigs and Kafka tooling see familiar values.
logtrove adds ``message.id.header``, ``message.tag.header`` and ``index.headers``.

``compression.type`` is Kafka's: ``producer`` (the default) stores each batch as its
producer compressed it; ``uncompressed``, ``zstd``, ``lz4``, ``snappy`` or ``gzip`` has
every produced batch in another codec recompressed on append
(:func:`logtrove.records.recompress_batch`; the broker does it in a worker thread).

Durability default: ``flush.ms`` = 1000 and ``flush.messages`` unset. Every append is
written to the OS (so a crash of the process loses nothing acknowledged); an fsync of
the log and its indexes follows within a second (so a crash of the machine loses at
most the last second). Set ``flush.messages=1`` to fsync every batch before it is
acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from logtrove.records import Compression
from logtrove.storage.errors import InvalidConfigError

_NEVER = 2**63 - 1


def _parse_int(lo: int, hi: int = _NEVER) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{raw!r} is not an integer") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value} is outside [{lo}, {hi}]")
        return value

    return parse


def _parse_ratio(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{value} is outside [0, 1]")
    return value


def _parse_policy(raw: str) -> str:
    parts = sorted({p.strip() for p in raw.split(",") if p.strip()})
    if not parts or any(p not in ("compact", "delete") for p in parts):
        raise ValueError(f"{raw!r} is not one of delete, compact, compact,delete")
    return ",".join(parts)


def _parse_name(raw: str) -> str:
    if not raw or raw != raw.strip():
        raise ValueError("must be a non-empty header name without surrounding spaces")
    return raw


def _parse_names(raw: str) -> str:
    names = [n.strip() for n in raw.split(",") if n.strip()]
    return ",".join(dict.fromkeys(names))


COMPRESSION_TYPES = ("producer", "uncompressed", "zstd", "lz4", "snappy", "gzip")


def _parse_compression_type(raw: str) -> str:
    if raw not in COMPRESSION_TYPES:
        raise ValueError(f"{raw!r} is not one of {', '.join(COMPRESSION_TYPES)}")
    return raw


def _parse_timestamp_type(raw: str) -> str:
    if raw not in ("CreateTime", "LogAppendTime"):
        raise ValueError("must be CreateTime or LogAppendTime")
    return raw


@dataclass(frozen=True)
class ConfigDef:
    """One topic config: its Kafka name, default (as a string), parser and doc."""

    name: str
    attr: str
    default: str
    parse: Callable[[str], Any]
    doc: str


CONFIG_DEFS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "cleanup.policy", "cleanup_policy", "delete", _parse_policy, "delete, compact, or compact,delete"
    ),
    ConfigDef(
        "retention.ms",
        "retention_ms",
        "604800000",
        _parse_int(-1),
        "delete segments whose newest record is older than this; -1 = keep forever",
    ),
    ConfigDef(
        "retention.bytes",
        "retention_bytes",
        "-1",
        _parse_int(-1),
        "delete oldest segments while the partition is larger; -1 = no limit",
    ),
    ConfigDef(
        "segment.bytes",
        "segment_bytes",
        "1073741824",
        _parse_int(1024, 2**31 - 1),
        "roll a new segment when the active one would pass this size",
    ),
    ConfigDef(
        "segment.ms",
        "segment_ms",
        "604800000",
        _parse_int(1),
        "roll a new segment when the active one's first record is older than this",
    ),
    ConfigDef(
        "index.interval.bytes",
        "index_interval_bytes",
        "4096",
        _parse_int(0),
        "bytes of log between two sparse offset/time index entries",
    ),
    ConfigDef(
        "flush.messages",
        "flush_messages",
        str(_NEVER),
        _parse_int(1),
        "fsync after this many messages (1 = every batch before it is acknowledged)",
    ),
    ConfigDef(
        "flush.ms", "flush_ms", "1000", _parse_int(0), "fsync data at most this long after it was appended"
    ),
    ConfigDef(
        "max.message.bytes",
        "max_message_bytes",
        "1048588",
        _parse_int(0, 2**31 - 1),
        "largest record batch accepted",
    ),
    ConfigDef(
        "message.timestamp.type",
        "message_timestamp_type",
        "CreateTime",
        _parse_timestamp_type,
        "CreateTime (client's) or LogAppendTime (broker's)",
    ),
    ConfigDef(
        "compression.type",
        "compression_type",
        "producer",
        _parse_compression_type,
        "producer (keep each batch's codec) or uncompressed, zstd, lz4, snappy, gzip "
        "(batches in another codec are recompressed on append)",
    ),
    ConfigDef(
        "file.delete.delay.ms",
        "file_delete_delay_ms",
        "60000",
        _parse_int(0),
        "how long a deleted segment stays readable by in-flight readers",
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio",
        "min_cleanable_dirty_ratio",
        "0.5",
        _parse_ratio,
        "compact when the dirty share of the log reaches this",
    ),
    ConfigDef(
        "min.compaction.lag.ms",
        "min_compaction_lag_ms",
        "0",
        _parse_int(0),
        "records younger than this are never compacted",
    ),
    ConfigDef(
        "max.compaction.lag.ms",
        "max_compaction_lag_ms",
        str(_NEVER),
        _parse_int(1),
        "records older than this are compacted whatever the dirty ratio",
    ),
    ConfigDef(
        "delete.retention.ms",
        "delete_retention_ms",
        "86400000",
        _parse_int(0),
        "how long tombstones stay after their first cleaning",
    ),
    ConfigDef(
        "message.id.header",
        "message_id_header",
        "id",
        _parse_name,
        "header carrying the client's message ID (indexed)",
    ),
    ConfigDef(
        "message.tag.header",
        "message_tag_header",
        "tag",
        _parse_name,
        "header carrying the record's tag (indexed for tag subscriptions)",
    ),
    ConfigDef(
        "index.headers",
        "index_headers",
        "",
        _parse_names,
        "comma-separated header names to index for exact lookups",
    ),
)

CONFIG_BY_NAME: Mapping[str, ConfigDef] = {d.name: d for d in CONFIG_DEFS}

SOURCE_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "retention.ms",
        "retention.bytes",
        "delete.retention.ms",
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
        "min.cleanable.dirty.ratio",
        "max.message.bytes",
        "message.timestamp.type",
    }
)
"""The topic configs a followed (mirrored) topic takes from its source: they decide which
records the log keeps (retention, compaction) and which it may hold, so a local value
would make the copy drop what the source keeps, or refuse what it holds. A mirror copies
them; clients may not change them on a followed topic. Every other config is local to
this copy (segment sizes, flushing, indexes: how the records are stored and found, not
which) and stays the client's to change."""


@dataclass(frozen=True)
class TopicConfig:
    """The effective configuration of one topic (defaults filled in, values typed)."""

    cleanup_policy: str = "delete"
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    index_interval_bytes: int = 4096
    flush_messages: int = _NEVER
    flush_ms: int = 1000
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    file_delete_delay_ms: int = 60_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _NEVER
    delete_retention_ms: int = 86_400_000
    message_id_header: str = "id"
    message_tag_header: str = "tag"
    index_headers: str = ""

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str]) -> TopicConfig:
        """Build from Kafka-named string overrides; raises :class:`InvalidConfigError`."""
        values: dict[str, Any] = {}
        for name, raw in overrides.items():
            definition = CONFIG_BY_NAME.get(name)
            if definition is None:
                known = ", ".join(sorted(CONFIG_BY_NAME))
                raise InvalidConfigError(f"unknown topic config {name!r}; known configs: {known}")
            try:
                values[definition.attr] = definition.parse(str(raw))
            except ValueError as exc:
                raise InvalidConfigError(f"invalid value for {name}: {exc}") from None
        return cls(**values)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compression(self) -> Compression | None:
        """The codec every appended batch is stored in, or ``None`` (``producer``): each
        batch keeps the codec its producer chose."""
        if self.compression_type == "producer":
            return None
        return (
            Compression.NONE
            if self.compression_type == "uncompressed"
            else Compression.parse(self.compression_type)
        )

    @property
    def indexed_headers(self) -> tuple[str, ...]:
        return tuple(n for n in self.index_headers.split(",") if n)

    def as_strings(self) -> dict[str, str]:
        """Every config with its effective value, Kafka-named, as strings."""
        out: dict[str, str] = {}
        for d in CONFIG_DEFS:
            out[d.name] = str(getattr(self, d.attr))
        return out


def validate_overrides(overrides: Mapping[str, str]) -> dict[str, str]:
    """Check overrides and return them normalised (parsed then printed back)."""
    config = TopicConfig.from_overrides(overrides)
    return {name: str(getattr(config, CONFIG_BY_NAME[name].attr)) for name in overrides}


assert {d.attr for d in CONFIG_DEFS} == {f.name for f in fields(TopicConfig)}
