"""Consumer groups through a running broker: ListGroups, OffsetFetch and OffsetCommit,
and the tag subscriptions kept in ``__consumer_offsets`` (written by Produce, read back
by ListOffsets and Fetch: the broker is the one writer of its data directory)."""

from __future__ import annotations

from collections.abc import Mapping

from logtrove.client.admin import list_offsets, topic_partitions
from logtrove.client.errors import KafkaProtocolError, check
from logtrove.client.kafka import KafkaClient
from logtrove.client.records import fetch, produce
from logtrove.clock import SYSTEM_CLOCK, Clock
from logtrove.groups import OFFSETS_TOPIC
from logtrove.groups import subscriptions as subs
from logtrove.wire import EARLIEST, LATEST, ApiKey, offset_fetch_body


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
    resp = client.request(ApiKey.OFFSET_FETCH, 8, offset_fetch_body(group, topics))
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


class BrokerCommitter:
    """:class:`~logtrove.groups.consumer.OffsetCommitter` through a running broker."""

    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        found = committed(self.client, group, {topic: partitions})
        return {p: found.get((topic, p)) for p in partitions}

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        commit(self.client, group, topic, offsets)


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
