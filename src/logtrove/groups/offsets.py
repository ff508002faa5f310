"""Committed offsets, stored as records in the compacted topic ``__consumer_offsets``.

Each commit of one partition is one record whose key names what is committed and whose
value is the commit; compaction keeps only the latest value per key, and a tombstone
(null value) forgets it. The encodings are Kafka's own ``OffsetCommitKey`` (version 1)
and ``OffsetCommitValue`` (version 3), so the topic can be read by Kafka tooling::

    key   ┌─────────────┬────────────────────┬────────────────────┬──────────────┐
          │ version i16 │ group  (i16 len +  │ topic (i16 len +   │ partition i32│
          │ = 1         │ UTF-8)             │ UTF-8)             │              │
          └─────────────┴────────────────────┴────────────────────┴──────────────┘
    value ┌─────────────┬───────────┬──────────────────┬──────────────────┬───────────────────┐
          │ version i16 │ offset i64│ leader_epoch i32 │ metadata (i16 len│ commit_timestamp  │
          │ = 3         │           │ (-1 = unknown)   │ + UTF-8)         │ i64 (epoch ms)    │
          └─────────────┴───────────┴──────────────────┴──────────────────┴───────────────────┘

A group's commits all go to partition ``hash(group) % partitions`` so they stay in
order. On start :meth:`OffsetStore.load` replays the topic into memory; reads are served
from memory, commits are appended (and so survive a restart) before they are acknowledged.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage

OFFSETS_TOPIC = "__consumer_offsets"
KEY_VERSION = 1
VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqi")  # version, offset, leader_epoch
_I64 = struct.Struct(">q")


class OffsetRecordError(ValueError):
    """A record of ``__consumer_offsets`` that is not an offset commit we understand."""


@dataclass(frozen=True, slots=True)
class CommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (size,) = _I16.unpack_from(buf, pos)
    pos += _I16.size
    if size < 0 or pos + size > len(buf):
        raise OffsetRecordError("bad string length")
    return buf[pos : pos + size].decode("utf-8"), pos + size


def encode_key(key: CommitKey) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(key.group) + _string(key.topic) + _I32.pack(key.partition)


def decode_key(raw: bytes) -> CommitKey:
    """Raises :class:`OffsetRecordError` for other key versions (e.g. group metadata)."""
    try:
        (version,) = _I16.unpack_from(raw, 0)
        if version not in (0, 1):
            raise OffsetRecordError(f"key version {version} is not an offset commit")
        group, pos = _read_string(raw, 2)
        topic, pos = _read_string(raw, pos)
        (partition,) = _I32.unpack_from(raw, pos)
    except (struct.error, UnicodeDecodeError) as exc:
        raise OffsetRecordError(f"unreadable offset key: {exc}") from exc
    return CommitKey(group, topic, partition)


def encode_value(value: CommittedOffset) -> bytes:
    head = _VALUE_HEAD.pack(VALUE_VERSION, value.offset, value.leader_epoch)
    return head + _string(value.metadata) + _I64.pack(value.commit_timestamp)


def decode_value(raw: bytes) -> CommittedOffset:
    try:
        version, offset, epoch = _VALUE_HEAD.unpack_from(raw, 0)
        if version != VALUE_VERSION:
            raise OffsetRecordError(f"value version {version} is not understood")
        metadata, pos = _read_string(raw, _VALUE_HEAD.size)
        (timestamp,) = _I64.unpack_from(raw, pos)
    except (struct.error, UnicodeDecodeError) as exc:
        raise OffsetRecordError(f"unreadable offset value: {exc}") from exc
    return CommittedOffset(offset, epoch, metadata, timestamp)


class OffsetStore:
    """Committed offsets of every group: in memory, persisted in ``__consumer_offsets``."""

    def __init__(self, storage: Storage, *, partitions: int = 1) -> None:
        self.storage = storage
        self.partitions = partitions
        self._offsets: dict[CommitKey, CommittedOffset] = {}

    def partition_for(self, group: str) -> int:
        return zlib.crc32(group.encode("utf-8")) % self.topic_partitions()

    def topic_partitions(self) -> int:
        return self.storage.topic(OFFSETS_TOPIC).partitions

    def load(self) -> int:
        """Create the topic if needed and replay it; returns the number of live commits."""
        if not self.storage.has_topic(OFFSETS_TOPIC):
            self.storage.create_topic(
                OFFSETS_TOPIC, self.partitions, {"cleanup.policy": "compact", "segment.bytes": str(100 << 20)}
            )
        self._offsets.clear()
        for p in range(self.topic_partitions()):
            for record in self.storage.log(OFFSETS_TOPIC, p).records():
                if record.key is None:
                    continue
                try:
                    key = decode_key(record.key)
                    if record.value is None:
                        self._offsets.pop(key, None)
                    else:
                        self._offsets[key] = decode_value(record.value)
                except OffsetRecordError:
                    continue
        return len(self._offsets)

    def commit(self, group: str, commits: dict[tuple[str, int], CommittedOffset]) -> None:
        """Persist the commits of one group in one batch, then make them visible."""
        if not commits:
            return
        now = self.storage.clock.now_ms()
        records = [
            NewRecord(key=encode_key(CommitKey(group, t, p)), value=encode_value(c), timestamp=now)
            for (t, p), c in commits.items()
        ]
        self.storage.log(OFFSETS_TOPIC, self.partition_for(group)).append(build_batch(records))
        for (t, p), c in commits.items():
            self._offsets[CommitKey(group, t, p)] = c

    def delete(self, keys: list[CommitKey]) -> None:
        """Write tombstones for the given commits (e.g. their topic was deleted)."""
        by_group: dict[str, list[CommitKey]] = {}
        for key in keys:
            if key in self._offsets:
                by_group.setdefault(key.group, []).append(key)
        for group, group_keys in by_group.items():
            records = [NewRecord(key=encode_key(k), value=None) for k in group_keys]
            self.storage.log(OFFSETS_TOPIC, self.partition_for(group)).append(build_batch(records))
            for k in group_keys:
                self._offsets.pop(k, None)

    def get(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._offsets.get(CommitKey(group, topic, partition))

    def for_group(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        return {(k.topic, k.partition): v for k, v in self._offsets.items() if k.group == group}

    def for_topic(self, topic: str) -> list[CommitKey]:
        return [k for k in self._offsets if k.topic == topic]

    def groups(self) -> set[str]:
        return {k.group for k in self._offsets}
