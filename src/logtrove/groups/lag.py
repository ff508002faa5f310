"""Consumer lag per group × topic × partition, in messages, in time, and per tag.

For one partition and a group's committed offset ``c`` (DESIGN.md §5)::

    log start            c = committed                              log end offset
        │ consumed        │ ◀──────────── unconsumed ─────────────────▶ │
        ▼                 ▼  first unconsumed record (timestamp t)      ▼

* ``lag`` = log end offset − ``c`` (Kafka's number, 0 at least); ``None`` when the
  group never committed on the partition — "never committed" is not "caught up".
  **read_committed** (the default, as logtrove's readers and librdkafka's consumers): the
  end is the **last stable offset** instead, what such a consumer can reach — records of
  a transaction still open are not a backlog it could consume. ``read_uncommitted``
  measures to the log end. Either way the lag is an offset difference, as Kafka's: it
  counts transaction markers and aborted records in the range.
* ``time_lag_ms`` = now − ``t``, 0 when caught up; "now" comes from an injected
  :class:`~logtrove.clock.Clock`, so tests move time without sleeping.
* With a tag subscription on the topic (:mod:`.subscriptions`): ``tag_lag`` = the exact
  number of unconsumed records whose tag is wanted (counted from ``.tagidx``, see
  :mod:`.tags`), and ``tag_time_lag_ms`` = the age of the first of them. A consumer of
  one tag is thus not shown the backlog of the others. Under
  read_committed the count leaves out aborted records and ends at the last stable offset,
  and the first record is the first one the consumer will see.

Totals per topic and per group add the lags of the partitions that have a commit and
take the largest time lag; the number of never-committed partitions is reported beside.

:class:`LagMonitor` computes all of it from a data directory, which may be opened
read-only while a broker writes to it; committed offsets are read from
``__consumer_offsets`` by :class:`~logtrove.groups.progress.GroupProgress`. The CLI's
``--bootstrap`` mode (:mod:`logtrove.client.lag`) reads the same numbers from Kafka APIs,
and both compute the rows with one formula, :func:`lag_of`, and aggregate them with
:func:`aggregate`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.groups.offsets import CommittedOffset
from logtrove.groups.progress import GroupProgress
from logtrove.groups.subscriptions import TagSubscription
from logtrove.groups.tags import TagFilter, count_matching, first_matching
from logtrove.records import iter_records
from logtrove.storage import PartitionLog, Storage, UnknownTopicError
from logtrove.storage.txnview import CommittedView, committed_view


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """Lag of one group on one partition."""

    group: str
    topic: str
    partition: int
    log_start_offset: int | None
    log_end_offset: int
    committed_offset: int | None  # None: never committed
    commit_timestamp: int | None
    lag: int | None
    time_lag_ms: int | None
    tags: str | None = None  # the group's tag subscription on the topic
    tag_lag: int | None = None
    tag_time_lag_ms: int | None = None
    last_stable_offset: int | None = None  # read_committed: where the lag is measured to

    @property
    def never_committed(self) -> bool:
        return self.committed_offset is None

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "never_committed": self.never_committed}


def _sum(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _max(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


@dataclass(frozen=True, slots=True)
class TopicLag:
    """A group's lag on one topic: its partitions and their totals."""

    group: str
    topic: str
    partitions: tuple[PartitionLag, ...]

    @property
    def tags(self) -> str | None:
        return next((p.tags for p in self.partitions if p.tags is not None), None)

    @property
    def lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def time_lag_ms(self) -> int | None:
        return _max(p.time_lag_ms for p in self.partitions)

    @property
    def tag_lag(self) -> int | None:
        return _sum(p.tag_lag for p in self.partitions)

    @property
    def tag_time_lag_ms(self) -> int | None:
        return _max(p.tag_time_lag_ms for p in self.partitions)

    @property
    def never_committed(self) -> int:
        """How many partitions the group never committed on."""
        return sum(p.never_committed for p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "tags": self.tags,
            "lag": self.lag,
            "time_lag_ms": self.time_lag_ms,
            "tag_lag": self.tag_lag,
            "tag_time_lag_ms": self.tag_time_lag_ms,
            "never_committed_partitions": self.never_committed,
            "partitions": [p.to_json() for p in self.partitions],
        }


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A group's lag on every topic it committed on or subscribed to."""

    group: str
    topics: tuple[TopicLag, ...]

    @property
    def lag(self) -> int:
        return sum(t.lag for t in self.topics)

    @property
    def time_lag_ms(self) -> int | None:
        return _max(t.time_lag_ms for t in self.topics)

    @property
    def tag_lag(self) -> int | None:
        return _sum(t.tag_lag for t in self.topics)

    @property
    def never_committed(self) -> int:
        return sum(t.never_committed for t in self.topics)

    def partitions(self) -> list[PartitionLag]:
        return [p for t in self.topics for p in t.partitions]

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "lag": self.lag,
            "time_lag_ms": self.time_lag_ms,
            "tag_lag": self.tag_lag,
            "never_committed_partitions": self.never_committed,
            "topics": [t.to_json() for t in self.topics],
        }


def aggregate(rows: Iterable[PartitionLag]) -> list[GroupLag]:
    """Group partition rows into :class:`GroupLag` per group (sorted by group, topic,
    partition)."""
    by_group: dict[str, dict[str, list[PartitionLag]]] = {}
    for row in rows:
        by_group.setdefault(row.group, {}).setdefault(row.topic, []).append(row)
    out = []
    for group in sorted(by_group):
        topics = by_group[group]
        out.append(
            GroupLag(
                group,
                tuple(
                    TopicLag(group, t, tuple(sorted(topics[t], key=lambda r: r.partition)))
                    for t in sorted(topics)
                ),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class TagMatches:
    """Records of an offset range that a tag expression wants, and the first one's time."""

    matching: int
    first_timestamp: int | None


FirstTimestamp = Callable[[int], "int | None"]
"""The timestamp of the first record at or after an offset (``None``: there is none)."""

TagCount = Callable[[TagFilter, int, int], "TagMatches | None"]
"""The records of ``[start, end)`` a filter wants (``None``: they cannot be counted)."""


def lag_of(
    group: str,
    topic: str,
    partition: int,
    start: int | None,
    end: int,
    committed: int | None,
    commit_timestamp: int | None = None,
    *,
    now: int,
    first_timestamp: FirstTimestamp,
    count_tags: TagCount | None,
    subscription: TagSubscription | None = None,
    stable: int | None = None,
) -> PartitionLag:
    """The lag formula (see the module docstring), for a partition read anywhere: the
    data directory (:func:`partition_lag`) or a broker (:mod:`logtrove.client.lag`).
    ``stable`` is the last stable offset for a read_committed reader (the lag is measured
    to it), ``None`` to measure to ``end``. ``first_timestamp`` is asked only when there
    is lag; ``count_tags`` (``None``: tag lag unknown) only for a subscription that is
    not ``*``, over ``[min(committed, reach), reach)`` where ``reach`` is where the lag
    is measured to."""
    tags = subscription.expression if subscription is not None else None
    if committed is None:
        return PartitionLag(
            group, topic, partition, start, end, None, None, None, None, tags, last_stable_offset=stable
        )
    reach = end if stable is None else stable
    lag = max(reach - committed, 0)
    first = first_timestamp(committed) if lag else None
    time_lag = max(now - first, 0) if first is not None else 0
    tag_lag = tag_time_lag = None
    if subscription is not None:
        wanted = TagFilter.parse(subscription.expression)
        found = None
        if wanted.match_all:
            tag_lag, tag_time_lag = lag, time_lag
        elif count_tags is not None:
            found = count_tags(wanted, min(committed, reach), reach)
        if found is not None:
            tag_lag = found.matching
            first_tag = found.first_timestamp
            tag_time_lag = max(now - first_tag, 0) if first_tag is not None else 0
    return PartitionLag(
        group,
        topic,
        partition,
        start,
        end,
        committed,
        commit_timestamp,
        lag,
        time_lag,
        tags,
        tag_lag,
        tag_time_lag,
        stable,
    )


def count_tags(
    log: PartitionLog, wanted: TagFilter, start: int, end: int, view: CommittedView | None = None
) -> TagMatches:
    """The records of ``[start, end)`` of ``log`` that ``wanted`` wants, from ``.tagidx``
    (with ``view``, aborted records left out)."""
    matching = count_matching(log, wanted, start, end, view).matching if start < end else 0
    first = first_matching(log, wanted, start, view) if matching else None
    return TagMatches(matching, first.timestamp if first is not None else None)


def partition_lag(
    log: PartitionLog,
    group: str,
    commit: CommittedOffset | None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    subscription: TagSubscription | None = None,
    read_committed: bool = True,
) -> PartitionLag:
    """Lag of ``group`` on one partition, from its commit (``None``: never committed),
    to the last stable offset (``read_committed``) or the log end."""
    end = log.log_end_offset
    view = committed_view(log) if read_committed else None
    stable = min(view.last_stable_offset, end) if view is not None else None
    return lag_of(
        group,
        log.tp.topic,
        log.tp.partition,
        log.log_start_offset,
        end,
        commit.offset if commit is not None else None,
        commit.commit_timestamp if commit is not None else None,
        now=clock.now_ms(),
        first_timestamp=lambda position: _first_timestamp(log, position, view),
        count_tags=lambda wanted, start, stop: count_tags(log, wanted, start, stop, view),
        subscription=subscription,
        stable=stable,
    )


def _first_timestamp(log: PartitionLog, position: int, view: CommittedView | None) -> int | None:
    """The timestamp of the first record at or after ``position`` that the reader sees
    (data only; with ``view``, committed and below the last stable offset); ``None`` if
    there is none."""
    for header, data in log.batches(position, view.last_stable_offset if view is not None else None):
        if header.is_control or (view is not None and view.hides_batch(header)):
            continue
        first = next((r for r in iter_records(data, 0, header) if r.offset >= position), None)
        if first is not None:
            return first.timestamp
    return None


class LagMonitor:
    """Lag of every group from one data directory (read-only openings are fine)."""

    def __init__(self, storage: Storage, *, clock: Clock = SYSTEM_CLOCK, read_committed: bool = True) -> None:
        self.storage = storage
        self.clock = clock
        self.read_committed = read_committed
        self.progress = GroupProgress(storage)
        self._refreshed = False

    def refresh(self) -> None:
        """Pick up what the writer appended since (segments, commits, subscriptions)."""
        self.storage.refresh()
        self.progress.refresh()
        self._refreshed = True

    def groups(self) -> list[str]:
        if not self._refreshed:
            self.refresh()
        return self.progress.groups()

    def group_lag(self, group: str, topic: str | None = None) -> GroupLag:
        """Lag of ``group`` on every partition of the topics it committed on or
        subscribed to (only ``topic``, if given)."""
        if not self._refreshed:
            self.refresh()
        commits = self.progress.committed(group)
        topics = self.progress.topics_of(group) if topic is None else [topic]
        rows: list[PartitionLag] = []
        for name in topics:
            try:
                partitions = self.storage.topic(name).partitions
            except UnknownTopicError:
                if topic is not None:
                    raise
                continue  # committed on a topic deleted since
            subscription = self.progress.subscription(group, name)
            for p in range(partitions):
                rows.append(
                    partition_lag(
                        self.storage.log(name, p),
                        group,
                        commits.get((name, p)),
                        clock=self.clock,
                        subscription=subscription,
                        read_committed=self.read_committed,
                    )
                )
        found = aggregate(rows)
        return found[0] if found else GroupLag(group, ())

    def lag(self, group: str | None = None, topic: str | None = None) -> list[GroupLag]:
        """Lag of one group, or of every group (those with ``topic``, if given)."""
        if group is not None:
            return [self.group_lag(group, topic)]
        names = self.groups()
        if topic is not None:
            names = [g for g in names if topic in self.progress.topics_of(g)]
        return [self.group_lag(g, topic) for g in names]
