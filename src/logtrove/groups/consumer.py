"""Tag-filtered consumption for logtrove's own consumer (Python API and ``logtrove consume``).

Where the filtering happens: **at the data**. A :class:`TagConsumer` reads the data
directory itself — opened read-only while the broker runs, since readers never need the
lock — and asks ``.tagidx`` which offsets carry a wanted tag (:func:`~.tags.fetch_matching`);
only the batches holding them are read, and records of other tags never leave the disk.
That is RocketMQ's broker-side consume-queue filter, done by the process that reads the
segments (same machine as the broker), with no change to the Kafka protocol.

Progress goes to the group's committed offsets, through an :class:`OffsetCommitter`:
:class:`StoreCommitter` appends to ``__consumer_offsets`` when this process holds the
data directory (no broker), and the CLI's Kafka committer sends OffsetCommit to a
running broker. A commit is the position after the last *examined* offset, not after
the last matching record, so commits move past skipped records and the group's lag —
raw and tag-aware — reaches 0 once every matching record is consumed.

The consumer is a standalone member: it reads every partition of the topic (or those
given) and commits without a generation, as admin tools do. Do not run it in a group
whose Kafka consumers are active (the broker refuses such commits).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from logtrove.groups.offsets import CommittedOffset, OffsetStore
from logtrove.groups.tags import TagFilter, fetch_matching
from logtrove.records import Record
from logtrove.storage import PartitionLog, Storage

EARLIEST = "earliest"
LATEST = "latest"


class OffsetCommitter(Protocol):
    """Where a group's positions are read from and committed to."""

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]: ...

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None: ...


class StoreCommitter:
    """Commits appended to ``__consumer_offsets`` of a data directory this process holds
    for writing (no broker is running)."""

    def __init__(self, storage: Storage) -> None:
        self.store = OffsetStore(storage)
        self.store.load()
        self.clock = storage.clock

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        out: dict[int, int | None] = {}
        for p in partitions:
            c = self.store.get(group, topic, p)
            out[p] = c.offset if c is not None else None
        return out

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        now = self.clock.now_ms()
        self.store.commit(group, {(topic, p): CommittedOffset(o, -1, "", now) for p, o in offsets.items()})


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """A record and where it came from."""

    topic: str
    partition: int
    record: Record


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where to start a partition without a committed offset: ``earliest``, ``latest``,
    an ``offset``, ``from_end`` offsets before the log end, or the first record with
    timestamp ≥ ``timestamp`` (the log end if there is none)."""

    policy: str = EARLIEST
    offset: int | None = None
    timestamp: int | None = None
    from_end: int | None = None

    def resolve(self, log: PartitionLog) -> int:
        if self.from_end is not None:
            return max(log.log_end_offset - self.from_end, log.log_start_offset)
        if self.offset is not None:
            return min(max(self.offset, log.log_start_offset), log.log_end_offset)
        if self.timestamp is not None:
            found = log.offset_for_timestamp(self.timestamp)
            return found.offset if found is not None else log.log_end_offset
        return log.log_end_offset if self.policy == LATEST else log.log_start_offset


class TagConsumer:
    """Consume the records of ``topic`` that ``tags`` wants, optionally as ``group``.

    ``start`` applies to partitions without a committed offset (all of them when there
    is no group, or with ``ignore_committed``). :meth:`poll` returns the next matching
    records; :meth:`commit` commits the current positions.
    """

    def __init__(
        self,
        storage: Storage,
        topic: str,
        tags: TagFilter | str = "*",
        *,
        group: str | None = None,
        committer: OffsetCommitter | None = None,
        start: StartAt | None = None,
        partitions: Iterable[int] | None = None,
        ignore_committed: bool = False,
        max_scan_records: int = 50_000,
    ) -> None:
        if group is not None and committer is None:
            raise ValueError("a group needs a committer (StoreCommitter, or a broker's)")
        self.storage = storage
        self.topic = topic
        self.tags = TagFilter.parse(tags) if isinstance(tags, str) else tags
        self.group = group
        self.committer = committer
        self.max_scan_records = max_scan_records
        count = storage.topic(topic).partitions
        self.partitions = sorted(set(partitions)) if partitions is not None else list(range(count))
        start = start or StartAt()
        committed: dict[int, int | None] = {}
        if group is not None and committer is not None and not ignore_committed:
            committed = committer.committed(group, topic, self.partitions)
        self.positions: dict[int, int] = {}
        for p in self.partitions:
            c = committed.get(p)
            self.positions[p] = c if c is not None else start.resolve(storage.log(topic, p))
        self._committed = {p: c for p, c in committed.items() if c is not None}
        self._started = dict(self.positions)
        self._next = 0

    def _logs(self) -> Iterator[tuple[int, PartitionLog]]:
        n = len(self.partitions)
        for i in range(n):  # round robin, starting after the last partition served
            p = self.partitions[(self._next + i) % n]
            yield p, self.storage.log(self.topic, p)

    def poll(self, max_records: int = 500) -> list[ConsumedRecord]:
        """The next matching records (up to ``max_records``) from the partitions in turn;
        an empty list only when every partition is at its end (a read-only storage is
        refreshed first, to see what the writer appended)."""
        out = self._drain(max_records)
        if not out and self.storage.read_only:
            self.storage.refresh()
            out = self._drain(max_records)
        return out

    def _drain(self, max_records: int) -> list[ConsumedRecord]:
        """Fetch rounds until something matches or every partition is at its end (a
        round may stop early, after ``max_scan_records`` un-indexed records)."""
        while True:
            out = self._poll_once(max_records)
            if out or self.at_end():
                return out

    def _poll_once(self, max_records: int) -> list[ConsumedRecord]:
        out: list[ConsumedRecord] = []
        for p, plog in self._logs():
            if len(out) >= max_records:
                break
            position = self.positions[p]
            if position >= plog.log_end_offset:
                continue
            fetched = fetch_matching(
                plog, self.tags, position, max_records - len(out), max_scan_records=self.max_scan_records
            )
            self.positions[p] = max(position, fetched.next_offset)
            out += [ConsumedRecord(self.topic, p, r) for r in fetched.records]
            self._next = (self.partitions.index(p) + 1) % len(self.partitions)
        return out

    def at_end(self) -> bool:
        """Whether every partition's position is at its log end offset (as last seen)."""
        return all(self.positions[p] >= plog.log_end_offset for p, plog in self._logs())

    def commit(self) -> dict[int, int]:
        """Commit the positions that moved since the last commit (a partition this
        consumer has not moved on stays uncommitted); returns them."""
        if self.group is None or self.committer is None:
            raise ValueError("commit needs a group")
        moved = {p: o for p, o in self.positions.items() if self._committed.get(p, self._started[p]) != o}
        if moved:
            self.committer.commit(self.group, self.topic, moved)
            self._committed.update(moved)
        return moved

    def __iter__(self) -> Iterator[ConsumedRecord]:
        """Every matching record until all partitions are at their end."""
        while True:
            batch = self.poll()
            if not batch:
                return
            yield from batch
