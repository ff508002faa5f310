"""Tag subscriptions of groups, stored durably as records of ``__consumer_offsets``.

A group declares, per topic, which tags it consumes (``TagA || TagB``, or ``*``); lag is
then also counted for those tags only. The declaration lives next to the group's
committed offsets, in the same compacted topic and partition (``crc32(group) %
partitions``), under a key version of its own, so compaction keeps the latest
declaration per (group, topic), a tombstone removes it, and readers that only know
offset commits (``OffsetStore``, Kafka tooling) skip it as they skip group metadata::

    key   ┌───────────────────┬─────────────────────┬─────────────────────┐
          │ version i16 = 1000│ group (i16 len +    │ topic (i16 len +    │
          │                   │ UTF-8)              │ UTF-8)              │
          └───────────────────┴─────────────────────┴─────────────────────┘
    value ┌───────────────────┬─────────────────────┬─────────────────────┐
          │ version i16 = 0   │ expression (i16 len │ updated_ms i64      │
          │                   │ + UTF-8)            │                     │
          └───────────────────┴─────────────────────┴─────────────────────┘

Key version 1000 is far above the record types Kafka uses in that topic (0-1 offset
commits, 2 group metadata, 3+ the new group coordinator's records).

Who writes: the holder of the data directory. With no broker running, the CLI opens
the directory for writing and appends (:func:`append_subscription`); with a broker
running, the CLI produces the same record to ``__consumer_offsets`` through it
(:func:`subscription_record` gives key, value and partition).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from logtrove.groups.offsets import OFFSETS_TOPIC, OffsetStore
from logtrove.groups.tags import TagFilter
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage

KEY_VERSION = 1000
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")


class SubscriptionRecordError(ValueError):
    """A record of ``__consumer_offsets`` that is not a tag subscription."""


@dataclass(frozen=True, slots=True)
class SubscriptionKey:
    group: str
    topic: str


@dataclass(frozen=True, slots=True)
class TagSubscription:
    """A group's tag subscription on one topic."""

    group: str
    topic: str
    expression: str
    updated_ms: int

    @property
    def filter(self) -> TagFilter:
        return TagFilter.parse(self.expression)


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (size,) = _I16.unpack_from(buf, pos)
    pos += _I16.size
    if size < 0 or pos + size > len(buf):
        raise SubscriptionRecordError("bad string length")
    return buf[pos : pos + size].decode("utf-8"), pos + size


def is_subscription_key(raw: bytes | None) -> bool:
    return raw is not None and len(raw) >= 2 and _I16.unpack_from(raw)[0] == KEY_VERSION


def encode_key(key: SubscriptionKey) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(key.group) + _string(key.topic)


def decode_key(raw: bytes) -> SubscriptionKey:
    try:
        if _I16.unpack_from(raw)[0] != KEY_VERSION:
            raise SubscriptionRecordError("not a tag subscription key")
        group, pos = _read_string(raw, 2)
        topic, _ = _read_string(raw, pos)
    except (struct.error, UnicodeDecodeError) as exc:
        raise SubscriptionRecordError(f"unreadable subscription key: {exc}") from exc
    return SubscriptionKey(group, topic)


def encode_value(expression: str, updated_ms: int) -> bytes:
    return _I16.pack(VALUE_VERSION) + _string(expression) + _I64.pack(updated_ms)


def decode_value(key: SubscriptionKey, raw: bytes) -> TagSubscription:
    try:
        if _I16.unpack_from(raw)[0] != VALUE_VERSION:
            raise SubscriptionRecordError("subscription value version not understood")
        expression, pos = _read_string(raw, 2)
        (updated,) = _I64.unpack_from(raw, pos)
    except (struct.error, UnicodeDecodeError) as exc:
        raise SubscriptionRecordError(f"unreadable subscription value: {exc}") from exc
    return TagSubscription(key.group, key.topic, expression, updated)


def partition_for(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group (that of its offset commits)."""
    return zlib.crc32(group.encode("utf-8")) % partitions


def subscription_record(group: str, topic: str, expression: str | None, now_ms: int) -> NewRecord:
    """The record that sets (or, with ``expression=None``, removes) a subscription. The
    expression is validated and stored in its canonical form (``TagA || TagB``)."""
    key = encode_key(SubscriptionKey(group, topic))
    if expression is None:
        return NewRecord(key=key, value=None, timestamp=now_ms)
    canonical = str(TagFilter.parse(expression))
    return NewRecord(key=key, value=encode_value(canonical, now_ms), timestamp=now_ms)


def append_subscription(storage: Storage, group: str, topic: str, expression: str | None) -> None:
    """Set or remove a subscription in a data directory opened for writing (no broker
    runs). The topic must exist; ``__consumer_offsets`` is created if needed."""
    if not group:
        raise ValueError("a group ID cannot be empty")
    storage.topic(topic)  # unknown topic → UnknownTopicError
    if not storage.has_topic(OFFSETS_TOPIC):
        OffsetStore(storage).load()  # creates it with the broker's settings
    record = subscription_record(group, topic, expression, storage.clock.now_ms())
    partition = partition_for(group, storage.topic(OFFSETS_TOPIC).partitions)
    storage.log(OFFSETS_TOPIC, partition).append(build_batch([record]))
