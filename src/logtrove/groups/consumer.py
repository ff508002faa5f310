"""Tag-filtered consumption for logtrove's own consumer (Python API and ``logtrove consume``).

Where the filtering happens: **at the data, on the broker's side**. A :class:`TagConsumer`
asks a :class:`TagSource` for the records at or after a position that a tag expression
wants; the source answers from ``.tagidx`` (:func:`~.tags.fetch_matching`): only the
batches holding matching offsets are read, and records of other tags never leave the
disk. That is RocketMQ's broker-side consume-queue filter, with no change to the Kafka
protocol. Two sources:

* :class:`StorageSource` reads a data directory itself — opened read-only while the
  broker runs (readers never need the lock), so on the broker's machine. A
  :class:`~logtrove.storage.Storage` given to :class:`TagConsumer` is wrapped in one.
* ``logtrove.client.RemoteTagSource`` asks a running broker: its HTTP API runs
  ``fetch_matching`` next to the data (``GET /api/v1/topics/{t}/partitions/{p}/tags/fetch``)
  and start positions come from Kafka ListOffsets, so the consumer can run anywhere.

Progress goes to the group's committed offsets, through an :class:`OffsetCommitter`:
:class:`StoreCommitter` appends to ``__consumer_offsets`` when this process holds the
data directory (no broker), and the CLI's Kafka committer
(``logtrove.client.BrokerCommitter``) sends OffsetCommit to a running broker.
A commit is the position after the last *examined* offset, not after the last matching
record, so commits move past skipped records and the group's lag — raw and tag-aware —
reaches 0 once every matching record is consumed.

The consumer is a standalone member: it reads every partition of the topic (or those
given) and commits without a generation, as admin tools do. Do not run it in a group
whose Kafka consumers are active (the broker refuses such commits).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from logtrove.groups.offsets import CommittedOffset, OffsetStore
from logtrove.groups.tags import TagFetch, TagFilter, fetch_matching
from logtrove.records import Record
from logtrove.storage import PartitionLog, Storage
from logtrove.storage.txnview import committed_view

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

    def resolve(self, log: PartitionLog, end: int | None = None) -> int:
        """The start offset in ``log``, whose end is taken to be ``end`` if given (a
        read_committed reader's: the last stable offset)."""

        def by_time(timestamp: int) -> int | None:
            found = log.offset_for_timestamp(timestamp)
            return found.offset if found is not None else None

        return self.pick(log.log_start_offset, log.log_end_offset if end is None else end, by_time)

    def pick(self, log_start: int, log_end: int, by_time: Callable[[int], int | None]) -> int:
        """The start offset in a partition with these bounds; ``by_time(T)`` gives the
        first offset with timestamp ≥ T, or ``None`` when no record is that recent."""
        if self.from_end is not None:
            return max(log_end - self.from_end, log_start)
        if self.offset is not None:
            return min(max(self.offset, log_start), log_end)
        if self.timestamp is not None:
            found = by_time(self.timestamp)
            return min(found, log_end) if found is not None else log_end
        return log_end if self.policy == LATEST else log_start


class TagSource(Protocol):
    """Where a :class:`TagConsumer` reads: a data directory (:class:`StorageSource`) or a
    running broker (``logtrove.client.RemoteTagSource``)."""

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic``; raises if it does not exist."""
        ...

    def start_offset(self, topic: str, partition: int, start: StartAt) -> int:
        """Where ``start`` puts a partition without a committed offset."""
        ...

    def fetch(self, topic: str, partition: int, tags: TagFilter, offset: int, max_records: int) -> TagFetch:
        """Up to ``max_records`` wanted records at offsets ≥ ``offset``; ``next_offset``
        is past every examined offset and beyond ``offset`` unless it is the log end."""
        ...

    def refresh(self) -> None:
        """Look again for records appended since the last fetch."""
        ...


class StorageSource:
    """:class:`TagSource` over a data directory this process opened (read-only next to
    a running broker); a fetch scans at most about ``max_scan_records`` un-indexed
    records. With ``read_committed`` (the default) it shows what a read_committed Kafka
    consumer would: no records of aborted transactions, nothing past the last stable
    offset (:mod:`logtrove.storage.txnview`)."""

    def __init__(
        self, storage: Storage, *, max_scan_records: int = 50_000, read_committed: bool = True
    ) -> None:
        self.storage = storage
        self.max_scan_records = max_scan_records
        self.read_committed = read_committed

    def partition_count(self, topic: str) -> int:
        return self.storage.topic(topic).partitions

    def start_offset(self, topic: str, partition: int, start: StartAt) -> int:
        log = self.storage.log(topic, partition)
        return start.resolve(log, committed_view(log).last_stable_offset if self.read_committed else None)

    def fetch(self, topic: str, partition: int, tags: TagFilter, offset: int, max_records: int) -> TagFetch:
        log = self.storage.log(topic, partition)
        view = committed_view(log) if self.read_committed else None
        return fetch_matching(
            log, tags, offset, max_records, max_scan_records=self.max_scan_records, committed=view
        )

    def refresh(self) -> None:
        if self.storage.read_only:
            self.storage.refresh()  # a read-only opening sees the writer's appends only then


class TagConsumer:
    """Consume the records of ``topic`` that ``tags`` wants, optionally as ``group``.

    ``source`` is a :class:`TagSource`, or a :class:`Storage` to read directly (then
    ``max_scan_records`` bounds the un-indexed records one fetch scans). ``start`` applies
    to partitions without a committed offset (all of them when there is no group, or
    with ``ignore_committed``). :meth:`poll` returns the next matching records;
    :meth:`commit` commits the current positions.
    """

    def __init__(
        self,
        source: Storage | TagSource,
        topic: str,
        tags: TagFilter | str = "*",
        *,
        group: str | None = None,
        committer: OffsetCommitter | None = None,
        start: StartAt | None = None,
        partitions: Iterable[int] | None = None,
        ignore_committed: bool = False,
        max_scan_records: int = 50_000,
        read_committed: bool = True,
    ) -> None:
        if group is not None and committer is None:
            raise ValueError("a group needs a committer (StoreCommitter, or a broker's)")
        if isinstance(source, Storage):
            source = StorageSource(source, max_scan_records=max_scan_records, read_committed=read_committed)
        self.source: TagSource = source
        self.topic = topic
        self.tags = TagFilter.parse(tags) if isinstance(tags, str) else tags
        self.group = group
        self.committer = committer
        count = source.partition_count(topic)
        self.partitions = sorted(set(partitions)) if partitions is not None else list(range(count))
        start = start or StartAt()
        committed: dict[int, int | None] = {}
        if group is not None and committer is not None and not ignore_committed:
            committed = committer.committed(group, topic, self.partitions)
        self.positions: dict[int, int] = {}
        for p in self.partitions:
            c = committed.get(p)
            self.positions[p] = c if c is not None else source.start_offset(topic, p, start)
        self._ends: dict[int, int | None] = dict.fromkeys(self.partitions)  # log ends as last seen
        self._committed = {p: c for p, c in committed.items() if c is not None}
        self._started = dict(self.positions)
        self._next = 0

    def _in_turn(self) -> Iterator[int]:
        n = len(self.partitions)
        for i in range(n):  # round robin, starting after the last partition served
            yield self.partitions[(self._next + i) % n]

    def poll(self, max_records: int = 500) -> list[ConsumedRecord]:
        """The next matching records (up to ``max_records``) from the partitions in turn;
        an empty list only when every partition is at its end (after asking the source
        to look again for what was appended meanwhile)."""
        out = self._drain(max_records)
        if not out:
            self.source.refresh()
            self._ends = dict.fromkeys(self.partitions)
            out = self._drain(max_records)
        return out

    def _drain(self, max_records: int) -> list[ConsumedRecord]:
        """Fetch rounds until something matches or every partition is at its end (a
        fetch may stop early, after a scan budget, having matched nothing)."""
        while True:
            out, moved = self._poll_once(max_records)
            if out or not moved or self.at_end():
                return out

    def _poll_once(self, max_records: int) -> tuple[list[ConsumedRecord], bool]:
        """One fetch per partition not known to be at its end; the records, and whether
        any position moved or any log end was learnt."""
        out: list[ConsumedRecord] = []
        moved = False
        for p in self._in_turn():
            if len(out) >= max_records:
                break
            position, end = self.positions[p], self._ends[p]
            if end is not None and position >= end:
                continue
            fetched = self.source.fetch(self.topic, p, self.tags, position, max_records - len(out))
            self.positions[p] = max(position, fetched.next_offset)
            moved = moved or end is None or self.positions[p] > position
            self._ends[p] = fetched.log_end_offset
            out += [ConsumedRecord(self.topic, p, r) for r in fetched.records]
            self._next = (self.partitions.index(p) + 1) % len(self.partitions)
        return out, moved

    def at_end(self) -> bool:
        """Whether every partition's position is at its log end offset (as last seen)."""
        return all(e is not None and self.positions[p] >= e for p, e in self._ends.items())

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
