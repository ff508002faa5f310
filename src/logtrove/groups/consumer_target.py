"""The consumer protocol's target assignment inputs and the set algebra of
:data:`~logtrove.groups.consumer_state.TopicPartitions` (``{topic: {partition}}``) that
reconciliation in :mod:`.consumer_protocol` works with."""

from __future__ import annotations

from collections.abc import Mapping

from logtrove.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from logtrove.groups.consumer_state import ConsumerGroup, ConsumerMember, TopicPartitions


def forget_unused_regexes(group: ConsumerGroup) -> None:
    """Drop the resolutions of regexes no member subscribes with any more (as Kafka does
    at once), so a regex subscribed to again is resolved anew, after the heartbeat."""
    used = {m.subscribed_topic_regex for m in group.members.values()}
    group.regex_topics = {r: ts for r, ts in group.regex_topics.items() if r in used}


def group_assignor(group: ConsumerGroup) -> str:
    """The assignor most members ask for (ties: by name), else the default."""
    asked = [m.server_assignor for m in group.members.values() if m.server_assignor in ASSIGNORS]
    if not asked:
        return DEFAULT_ASSIGNOR
    return min(set(asked), key=lambda a: (-asked.count(a), str(a))) or DEFAULT_ASSIGNOR


def subscription(group: ConsumerGroup, member: ConsumerMember, topics: Mapping[str, int]) -> frozenset[str]:
    """The existing topics a member subscribes to: its names, and what its regex matched
    when last resolved (nothing before the first resolution) among the topics its
    principal may describe (Kafka resolves a member's regex only to those)."""
    matched = group.regex_topics.get(member.subscribed_topic_regex or "", frozenset())
    if member.describable is not None:
        matched &= member.describable
    return frozenset(t for t in member.subscribed_topic_names | matched if t in topics)


def copy(tps: TopicPartitions) -> TopicPartitions:
    return {t: set(ps) for t, ps in tps.items() if ps}


def nonempty(tps: TopicPartitions) -> TopicPartitions:
    return {t: ps for t, ps in tps.items() if ps}


def within(small: TopicPartitions, big: TopicPartitions) -> bool:
    return all(ps <= big.get(t, set()) for t, ps in small.items())


def overlaps(a: TopicPartitions, b: TopicPartitions) -> bool:
    return any(ps & b.get(t, set()) for t, ps in a.items())


def intersect(a: TopicPartitions, b: TopicPartitions) -> TopicPartitions:
    return {t: ps & b[t] for t, ps in a.items() if t in b and ps & b[t]}


def minus(a: TopicPartitions, b: TopicPartitions) -> TopicPartitions:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}
