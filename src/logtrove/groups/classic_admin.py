"""The classic groups' offset, listing and administration APIs (OffsetCommit's rules,
DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, and the hand-over to the consumer
protocol), a part of :class:`~logtrove.groups.coordinator.GroupCoordinator`."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from logtrove.groups.classic_state import (
    COMPLETING,
    DEAD,
    EMPTY,
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    INVALID_GROUP_ID,
    NON_EMPTY_GROUP,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    Group,
    subscribed_topics,
)
from logtrove.groups.offsets import CommitKey, CommittedOffset, OffsetStore


class ClassicGroupAdmin(abc.ABC):
    """The offsets and admin side of the coordinator: the listing and admin methods look
    at a group only after its timed-out sessions expired (:meth:`_group_now`,
    :meth:`expire_sessions`)."""

    offsets: OffsetStore
    groups: dict[str, Group]
    _now: Callable[[], float]  # the coordinator's monotonic clock

    @abc.abstractmethod
    def expire_sessions(self) -> float:
        """Remove the members whose session timed out; the next session deadline."""

    @abc.abstractmethod
    def _group_now(self, group_id: str) -> Group | None:
        """The group with its timed-out sessions expired."""

    # -- offsets ---------------------------------------------------------------------
    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        commits: dict[tuple[str, int], CommittedOffset],
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        """OffsetCommit: an error code for the whole request, after persisting on success.

        Kafka's rules for a group with members: a commit that names a member or a
        generation must come from a current member (``UNKNOWN_MEMBER_ID``; a stale
        process of a static member is ``FENCED_INSTANCE_ID``) of the current generation
        (``ILLEGAL_GENERATION``); one that names neither (``generation`` -1, as by admin
        tools and manual-assignment consumers) is ``UNKNOWN_MEMBER_ID``. A valid commit is
        accepted while Stable and while PreparingRebalance — the generation is still the
        member's until the join phase completes, and members commit in their revoke
        callbacks — and answered ``REBALANCE_IN_PROGRESS`` while CompletingRebalance
        (the member has a new generation but no assignment yet). A group with no members
        accepts any commit (group membership does not survive a broker restart, so a
        member's commit after one is still taken).
        """
        error = self.check_committer(group_id, member_id, generation, group_instance_id)
        if error:
            return error
        self.offsets.commit(group_id, commits)
        return NONE

    def check_committer(
        self, group_id: str, member_id: str, generation: int, group_instance_id: str | None = None
    ) -> ErrorCode:
        """The error for a commit of ``group_id`` by this member and generation (the rules
        of :meth:`commit_offsets`), or ``NONE``; a valid commit counts as the member's
        heartbeat. TxnOffsetCommit asks this too when it names a member or generation."""
        group = self.groups.get(group_id)
        if group is not None and group.members:
            instance = group_instance_id or None
            if not (member_id or generation >= 0 or instance):
                return UNKNOWN_MEMBER_ID
            error = group.validate_member(member_id, instance)
            if error:
                return error
            if generation != group.generation:
                return ILLEGAL_GENERATION
            if group.state == COMPLETING:
                return REBALANCE_IN_PROGRESS
            group.members[member_id].last_seen = self._now()
        return NONE

    def committed(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self.offsets.get(group_id, topic, partition)

    # -- listing ---------------------------------------------------------------------
    def describe(self, group_id: str) -> dict[str, Any]:
        group = self._group_now(group_id)
        if group is None:
            state = EMPTY if group_id in self.offsets.groups() else DEAD
            return {"error_code": NONE, "group_id": group_id, "group_state": state, "members": []}
        return {
            "error_code": NONE,
            "group_id": group_id,
            "group_state": group.state,
            "protocol_type": group.protocol_type or "",
            "protocol_data": group.protocol or "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata_for(group.protocol),
                    "member_assignment": m.assignment,
                }
                for m in group.members.values()
            ],
        }

    def list_groups(self) -> list[dict[str, Any]]:
        self.expire_sessions()
        names = set(self.groups) | self.offsets.groups()
        out = []
        for name in sorted(names):
            group = self.groups.get(name)
            out.append(
                {
                    "group_id": name,
                    "protocol_type": (group.protocol_type if group else None) or "consumer",
                    "group_state": group.state if group else EMPTY,
                }
            )
        return out

    # -- administration --------------------------------------------------------------
    def has_live_group(self, group_id: str) -> bool:
        """Whether the classic protocol holds ``group_id`` (it has members or is
        rebalancing), so that the consumer protocol may not take it."""
        group = self.groups.get(group_id)
        return group is not None and (bool(group.members) or group.state != EMPTY)

    def drop_empty(self, group_id: str) -> None:
        """Forget an empty classic group (the consumer protocol takes its ID over); its
        commits stay."""
        if group_id in self.groups and not self.has_live_group(group_id):
            del self.groups[group_id]

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of one group, with Kafka's rules: only a group with no members
        goes (``NON_EMPTY_GROUP`` otherwise), taking its committed offsets with it
        (tombstones in ``__consumer_offsets``, so a restart does not bring them back);
        a group that neither has members nor commits is ``GROUP_ID_NOT_FOUND``."""
        if not group_id:
            return INVALID_GROUP_ID
        group = self._group_now(group_id)
        if group is not None and (group.members or group.state != EMPTY):
            return NON_EMPTY_GROUP
        commits = self.offsets.for_group(group_id)
        if group is None and not commits:
            return GROUP_ID_NOT_FOUND
        self.offsets.delete([CommitKey(group_id, t, p) for t, p in commits])
        self.groups.pop(group_id, None)
        return NONE

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetDelete: ``(group error, error per partition)``. As Kafka: an unknown
        group is ``GROUP_ID_NOT_FOUND``; a group with members of another protocol type
        than ``consumer`` is ``NON_EMPTY_GROUP``; in a consumer group, a partition of a
        topic a member subscribes to is ``GROUP_SUBSCRIBED_TO_TOPIC`` and keeps its
        commit; every other named commit is deleted durably (a partition with none is
        simply answered without error)."""
        if not group_id:
            return INVALID_GROUP_ID, {}
        group = self._group_now(group_id)
        commits = self.offsets.for_group(group_id)
        if group is None and not commits:
            return GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if group is not None and group.members:
            if group.protocol_type != "consumer":
                return NON_EMPTY_GROUP, {}
            for member in group.members.values():
                subscribed |= subscribed_topics(member.metadata_for(group.protocol))
        errors = {tp: GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else NONE for tp in partitions}
        gone = [
            CommitKey(group_id, t, p) for (t, p), error in errors.items() if not error and (t, p) in commits
        ]
        self.offsets.delete(gone)
        return NONE, errors
