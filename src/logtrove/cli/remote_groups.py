"""Consumer groups through a running broker (``--bootstrap``), over the Kafka protocol.

ListGroups, OffsetFetch, ListOffsets and Fetch answer ``logtrove lag`` and ``logtrove
groups list`` when the broker holds the data directory; OffsetCommit carries the commits
of ``logtrove consume --group``; Produce writes tag subscriptions into
``__consumer_offsets`` (the broker is the one writer of its data directory). All through
the small blocking client :class:`~logtrove.broker.client.KafkaClient`, one request at a
time, with the versions logtrove's broker serves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from logtrove.broker.client import KafkaClient, KafkaProtocolError, check, fetch_body
from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.groups import OFFSETS_TOPIC
from logtrove.groups import subscriptions as subs
from logtrove.groups.lag import GroupLag, PartitionLag, aggregate
from logtrove.groups.tags import TagFetch, TagFilter, count_matching, first_matching
from logtrove.records import NewRecord, Record, RecordsError, build_batch, iter_records, read_header
from logtrove.records.batch import HEADER_SIZE
from logtrove.storage import Storage, StorageError
from logtrove.storage.txnview import committed_view, marker_kind
from logtrove.wire import ApiKey

EARLIEST, LATEST = -2, -1
FETCH_WAIT_MS = 100


def cluster_id(client: KafkaClient) -> str | None:
    meta = client.request(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    return meta.cluster_id  # type: ignore[no-any-return]


def open_brokers_data(data: Path, cluster: str | None) -> Storage | None:
    """``data`` opened read-only if it is the data directory of the broker of ``cluster``
    (that broker runs on this machine), else ``None``."""
    if not (data / "meta.json").is_file():
        return None
    storage = Storage.open(data, read_only=True)
    if storage.data_dir.cluster_id == cluster:
        return storage
    storage.close()
    return None


def topic_partitions(client: KafkaClient, topic: str) -> int | None:
    """The partition count of ``topic``, or ``None`` if it does not exist."""
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    found = client.request(ApiKey.METADATA, 12, body).topics[0]
    return None if int(found.error_code) else len(found.partitions)


def list_offsets(
    client: KafkaClient, topic: str, partitions: list[int], timestamp: int, *, read_committed: bool = False
) -> dict[int, int]:
    """ListOffsets v7 of ``timestamp`` (or EARLIEST / LATEST; LATEST is the last stable
    offset with ``read_committed``)."""
    body = {
        "replica_id": -1,
        "isolation_level": 1 if read_committed else 0,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": p, "timestamp": timestamp} for p in partitions],
            }
        ],
    }
    parts = client.request(ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions
    for p in parts:
        check(p.error_code, None, f"list offsets of {topic}-{p.partition_index}")
    return {int(p.partition_index): int(p.offset) for p in parts}


def list_groups(client: KafkaClient) -> list[dict[str, str]]:
    """Every group with its state, protocol type and group type (ListGroups v5:
    ``classic`` or ``consumer``, the KIP-848 protocol)."""
    resp = client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    check(resp.error_code, None, "list groups")
    return [
        {"group": g.group_id, "state": g.group_state, "protocol_type": g.protocol_type, "type": g.group_type}
        for g in resp.groups
    ]


def committed(
    client: KafkaClient, group: str, topics: Mapping[str, list[int]] | None = None
) -> dict[tuple[str, int], int]:
    """Committed offsets of ``group`` (all of them, or of ``topics``); uncommitted
    partitions are left out."""
    wanted = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    resp = client.request(
        ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": wanted}], "require_stable": False}
    )
    found = resp.groups[0]
    check(found.error_code, None, f"fetch offsets of {group}")
    out = {}
    for t in found.topics:
        for p in t.partitions:
            check(p.error_code, None, f"fetch offsets of {group} on {t.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                out[(str(t.name), int(p.partition_index))] = int(p.committed_offset)
    return out


def commit(client: KafkaClient, group: str, topic: str, offsets: Mapping[int, int]) -> None:
    """OffsetCommit without membership (generation -1), as admin tools commit."""
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p, o in sorted(offsets.items())
                ],
            }
        ],
    }
    for t in client.request(ApiKey.OFFSET_COMMIT, 8, body).topics:
        for p in t.partitions:
            check(p.error_code, None, f"commit {group} on {t.name}-{p.partition_index}")


def fetch(
    client: KafkaClient,
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int = 1 << 20,
    *,
    read_committed: bool = False,
) -> TagFetch:
    """The records of the first batches at ``offset`` or after (none at the end), as a
    fetch of every tag: ``next_offset`` is past the last whole batch in the answer
    (control batches and undecodable ones included, so a reader never stalls on them;
    ``offset`` itself when the answer held no whole batch), ``log_end_offset`` the
    partition's high watermark.

    At the log end the broker holds the answer up to ``FETCH_WAIT_MS`` for new records,
    the long poll of Kafka consumers (with a wait of 0, some brokers, tansu among them,
    answer without the partition at all).

    With ``read_committed`` the Fetch asks for READ_COMMITTED: the broker answers up to the
    last stable offset (then ``log_end_offset``) with the partition's aborted transactions,
    and the records of those are dropped as Kafka's consumer does: a producer's batches are
    aborted from its aborted transaction's first offset until its ABORT marker.

    Raises :class:`KafkaProtocolError` (code 1, OFFSET_OUT_OF_RANGE) for an offset below
    the log start or past the end, as Kafka does.
    """
    body = fetch_body(
        {topic: [(partition, offset, max_bytes)]},
        max_wait_ms=FETCH_WAIT_MS,
        max_bytes=max_bytes,
        isolation_level=1 if read_committed else 0,
    )
    answer = client.request(ApiKey.FETCH, 12, body).responses
    if not answer or not answer[0].partitions:
        raise KafkaProtocolError(f"fetch {topic}-{partition}: the broker's answer left the partition out")
    part = answer[0].partitions[0]
    check(part.error_code, None, f"fetch {topic}-{partition}")
    data = bytes(part.records or b"")
    out: list[Record] = []
    pos, next_offset = 0, offset
    aborted = sorted((a.first_offset, a.producer_id) for a in (part.aborted_transactions or ()))
    aborting: set[int] = set()  # producers whose batches are now those of an aborted transaction
    while pos + HEADER_SIZE <= len(data):
        header = read_header(data, pos)
        if pos + header.size > len(data):
            break
        while aborted and aborted[0][0] <= header.last_offset:
            aborting.add(aborted.pop(0)[1])
        hidden = read_committed and header.is_transactional and header.producer_id in aborting
        if header.is_control and hidden and marker_kind(data[pos : pos + header.size], header) == 0:
            aborting.discard(header.producer_id)  # its ABORT marker ends the aborted transaction
        if not header.is_control and not hidden:
            with contextlib.suppress(RecordsError):  # an undecodable batch: skipped, as the indexer does
                out += [r for r in iter_records(data, pos, header) if r.offset >= offset]
        next_offset = max(next_offset, header.last_offset + 1)
        pos += header.size
    end = int(part.last_stable_offset) if read_committed and part.last_stable_offset >= 0 else None
    return TagFetch(out, next_offset, int(part.high_watermark) if end is None else end)


def produce(client: KafkaClient, topic: str, partition: int, records: list[NewRecord]) -> int:
    """Append ``records`` as one batch (acks=all); returns the base offset."""
    data = {"name": topic, "partition_data": [{"index": partition, "records": build_batch(records)}]}
    resp = client.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout": 30_000, "topic_data": [data]})
    part = resp.responses[0].partition_responses[0]
    check(part.error_code, part.error_message, f"produce to {topic}-{partition}")
    return int(part.base_offset)


# -- tag subscriptions -------------------------------------------------------------------------
def subscribe(
    client: KafkaClient, group: str, topic: str, expression: str | None, clock: Clock = SYSTEM_CLOCK
) -> None:
    """Write a subscription record (``None``: remove it) through the broker."""
    if topic_partitions(client, topic) is None:
        raise KafkaProtocolError(f"unknown topic {topic!r}")
    n = topic_partitions(client, OFFSETS_TOPIC)
    if n is None:
        raise KafkaProtocolError(f"the broker has no {OFFSETS_TOPIC} topic yet")
    record = subs.subscription_record(group, topic, expression, clock.now_ms())
    produce(client, OFFSETS_TOPIC, subs.partition_for(group, n), [record])


def subscriptions(client: KafkaClient) -> dict[subs.SubscriptionKey, subs.TagSubscription]:
    """Every live tag subscription, read from ``__consumer_offsets`` through the broker."""
    n = topic_partitions(client, OFFSETS_TOPIC)
    out: dict[subs.SubscriptionKey, subs.TagSubscription] = {}
    if n is None:
        return out
    parts = list(range(n))
    starts, ends = (
        list_offsets(client, OFFSETS_TOPIC, parts, EARLIEST),
        list_offsets(client, OFFSETS_TOPIC, parts, LATEST),
    )
    for p in parts:
        position = starts[p]
        while position < ends[p]:
            got = fetch(client, OFFSETS_TOPIC, p, position)
            if got.next_offset <= position:
                break
            for r in got.records:
                if subs.is_subscription_key(r.key) and r.key is not None:
                    try:
                        key = subs.decode_key(r.key)
                        if r.value is None:
                            out.pop(key, None)
                        else:
                            out[key] = subs.decode_value(key, r.value)
                    except subs.SubscriptionRecordError:
                        continue
            position = got.next_offset
    return out


# -- lag ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TagMatches:
    """Records of an offset range that a tag expression wants, and the first one's time."""

    matching: int
    first_timestamp: int | None


class TagCounter(Protocol):
    """Who counts the tagged records of a range: the data directory on this machine
    (:class:`StorageTagCounter`) or the broker's HTTP API (``remote_tags.HttpTagCounter``)."""

    def count(self, topic: str, partition: int, tags: TagFilter, start: int, end: int) -> TagMatches | None:
        """The matches in ``[start, end)``, or ``None`` when they cannot be counted."""
        ...


class StorageTagCounter:
    """Counts from ``.tagidx`` of the broker's data directory, opened read-only here."""

    def __init__(self, storage: Storage, *, read_committed: bool = True) -> None:
        self.storage = storage
        self.read_committed = read_committed

    def count(self, topic: str, partition: int, tags: TagFilter, start: int, end: int) -> TagMatches | None:
        try:
            log = self.storage.log(topic, partition)
            view = committed_view(log) if self.read_committed else None
            matching = count_matching(log, tags, start, end, view).matching
            first = first_matching(log, tags, start, view) if matching else None
        except StorageError:
            return None
        return TagMatches(matching, first.timestamp if first is not None else None)


def remote_lag(
    client: KafkaClient,
    group: str | None = None,
    topic: str | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    counter: TagCounter | None = None,
    read_committed: bool = True,
) -> list[GroupLag]:
    """Lag through the broker: committed offsets (OffsetFetch), log ends (ListOffsets;
    the last stable offset with ``read_committed``, as a read_committed consumer's end),
    the first unconsumed record's timestamp (Fetch). Tag lag needs the records' tags,
    which the Kafka protocol does not index: ``counter`` counts them, from ``[committed,
    log end)`` as read here, next to the data (the broker's data directory, or its HTTP
    API); without one it is left ``None``."""
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
                row = _row(
                    client,
                    g,
                    t,
                    p,
                    starts[p],
                    ends[p],
                    commits.get((t, p)),
                    sub,
                    clock,
                    counter,
                    read_committed,
                )
                rows.append(row)
    found = aggregate(rows)
    if group is not None and not found:
        return [GroupLag(group, ())]
    return found


def _row(
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
    """One row; with ``read_committed``, ``end`` is the last stable offset (the row's log
    end offset then too: ListOffsets does not give both in one question)."""
    tags = sub.expression if sub is not None else None
    if commit_offset is None:
        return PartitionLag(group, topic, partition, start, end, None, None, None, None, tags)
    now = clock.now_ms()
    lag = max(end - commit_offset, 0)
    time_lag = 0
    if lag:
        first = fetch(
            client, topic, partition, max(commit_offset, start), 64 * 1024, read_committed=read_committed
        ).records
        time_lag = max(now - first[0].timestamp, 0) if first else 0
    tag_lag = tag_time_lag = None
    if sub is not None:
        wanted = TagFilter.parse(sub.expression)
        if wanted.match_all:
            tag_lag, tag_time_lag = lag, time_lag
        elif counter is not None:
            found = counter.count(topic, partition, wanted, min(commit_offset, end), end)
            if found is not None:
                tag_lag = found.matching
                first_ts = found.first_timestamp
                tag_time_lag = max(now - first_ts, 0) if first_ts is not None else 0
    stable = end if read_committed else None
    return PartitionLag(
        group,
        topic,
        partition,
        start,
        end,
        commit_offset,
        None,
        lag,
        time_lag,
        tags,
        tag_lag,
        tag_time_lag,
        stable,
    )


class BrokerCommitter:
    """:class:`~logtrove.groups.consumer.OffsetCommitter` through a running broker."""

    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        found = committed(self.client, group, {topic: partitions})
        return {p: found.get((topic, p)) for p in partitions}

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        commit(self.client, group, topic, offsets)
