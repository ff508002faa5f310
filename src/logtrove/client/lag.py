"""Consumer lag through a running broker: committed offsets (OffsetFetch), log ends
(ListOffsets), the first unconsumed record's timestamp (Fetch), with the formula of the
local lag (:func:`logtrove.groups.lag.lag_of`), so both answer alike."""

from __future__ import annotations

from typing import Protocol

from logtrove.client.admin import list_offsets, topic_partitions
from logtrove.client.groups import committed, list_groups, subscriptions
from logtrove.client.kafka import KafkaClient
from logtrove.client.records import fetch
from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.groups import subscriptions as subs
from logtrove.groups.lag import GroupLag, PartitionLag, TagMatches, aggregate, lag_of
from logtrove.groups.tags import TagFilter
from logtrove.wire import EARLIEST, LATEST

FIRST_RECORD_BYTES = 64 * 1024  # one Fetch this large finds the first unconsumed record


class TagCounter(Protocol):
    """Who counts the tagged records of a range: the data directory on this machine
    (:class:`~logtrove.client.local.StorageTagCounter`) or the broker's HTTP API
    (:class:`~logtrove.client.http.HttpTagCounter`)."""

    def count(self, topic: str, partition: int, tags: TagFilter, start: int, end: int) -> TagMatches | None:
        """The matches in ``[start, end)``, or ``None`` when they cannot be counted."""
        ...


def remote_lag(
    client: KafkaClient,
    group: str | None = None,
    topic: str | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    counter: TagCounter | None = None,
    read_committed: bool = True,
) -> list[GroupLag]:
    """Lag through the broker; with ``read_committed`` (the default) to the last stable
    offset (ListOffsets with READ_COMMITTED), as a read_committed consumer's end: the
    rows' log end is then that offset too, since ListOffsets does not give both in one
    question. Tag lag needs the records' tags, which the Kafka protocol
    does not index: ``counter`` counts them, from ``[committed, log end)`` as read here,
    next to the data (the broker's data directory, or its HTTP API); without one it is
    left ``None``."""
    groups = [group] if group is not None else sorted(g["group"] for g in list_groups(client))
    subscribed = subscriptions(client)
    rows: list[PartitionLag] = []
    for g in groups:
        commits = committed(client, g)
        topics = {t for t, _ in commits} | {k.topic for k in subscribed if k.group == g}
        if topic is not None:
            topics = {topic} if topic in topics or group is not None else set()
        for t in sorted(topics):
            n = topic_partitions(client, t)
            if n is None:
                continue
            sub = subscribed.get(subs.SubscriptionKey(g, t))
            starts = list_offsets(client, t, list(range(n)), EARLIEST)
            ends = list_offsets(client, t, list(range(n)), LATEST, read_committed=read_committed)
            for p in range(n):
                commit = commits.get((t, p))
                rows.append(
                    _partition_lag(
                        client, g, t, p, starts[p], ends[p], commit, sub, clock, counter, read_committed
                    )
                )
    found = aggregate(rows)
    if group is not None and not found:
        return [GroupLag(group, ())]
    return found


def _partition_lag(
    client: KafkaClient,
    group: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    commit_offset: int | None,
    sub: subs.TagSubscription | None,
    clock: Clock,
    counter: TagCounter | None,
    read_committed: bool,
) -> PartitionLag:
    def first_timestamp(position: int) -> int | None:
        offset = max(position, start)
        first = fetch(
            client, topic, partition, offset, FIRST_RECORD_BYTES, read_committed=read_committed
        ).records
        return first[0].timestamp if first else None

    def count_tags(tags: TagFilter, low: int, high: int) -> TagMatches | None:
        assert counter is not None
        return counter.count(topic, partition, tags, low, high)

    return lag_of(
        group,
        topic,
        partition,
        start,
        end,
        commit_offset,
        now=clock.now_ms(),
        first_timestamp=first_timestamp,
        count_tags=count_tags if counter is not None else None,
        subscription=sub,
        stable=end if read_committed else None,
    )
