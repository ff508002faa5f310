"""The consumer protocol's offset and admin checks (OffsetCommit's and OffsetFetch's
member rules, DeleteGroups, OffsetDelete, and the hand-over to the classic protocol), a
part of :class:`~logtrove.groups.consumer_protocol.ConsumerGroups`."""

from __future__ import annotations

import abc
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from logtrove.groups.consumer_state import ConsumerGroup
from logtrove.groups.offsets import CommitKey, CommittedOffset, OffsetStore

NONE = ErrorCode.none


class ConsumerGroupAdmin(abc.ABC):
    """The commit, fetch and admin side of :class:`~logtrove.groups.consumer_protocol.ConsumerGroups`."""

    offsets: OffsetStore
    groups: dict[str, ConsumerGroup]
    dirty: bool
    clock: Callable[[], float]

    @abc.abstractmethod
    def _expire(self, group: ConsumerGroup, t: float) -> list[tuple[str, str]]:
        """Remove the group's members whose session or revocation timed out at ``t``."""

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def drop_empty(self, group_id: str) -> None:
        """Forget an empty group (the classic protocol takes its ID over); commits stay."""
        if group_id in self.groups and not self.groups[group_id].members:
            del self.groups[group_id]
            self.dirty = True

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int, version: int) -> ErrorCode:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: a commit without a member epoch
        (-1: admin tools, manual assignment) is taken only by an empty group; otherwise the
        member must exist (``UNKNOWN_MEMBER_ID``), use OffsetCommit v9+
        (``UNSUPPORTED_VERSION``) and be at its current epoch (``STALE_MEMBER_EPOCH``)."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if version < 9:
            return ErrorCode.unsupported_version
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return NONE

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Kafka's ``validateOffsetFetch``: without a member (ID null, epoch -1) anyone may
        read; a named member must exist at its current epoch."""
        group = self.groups[group_id]
        if member_id is None and member_epoch < 0:
            return NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        return NONE if member_epoch == member.member_epoch else ErrorCode.stale_member_epoch

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups: only an empty group goes, with its committed offsets."""
        group = self.groups[group_id]
        self._expire(group, self.clock())
        if group.members:
            return ErrorCode.non_empty_group
        self.offsets.delete([CommitKey(group_id, t, p) for t, p in self.offsets.for_group(group_id)])
        del self.groups[group_id]
        self.dirty = True
        return NONE

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetDelete: a partition of a subscribed topic is ``GROUP_SUBSCRIBED_TO_TOPIC``
        and keeps its commit; the other named commits are deleted."""
        group = self.groups[group_id]
        self._expire(group, self.clock())
        subscribed = group.subscribed_topics()
        errors = {
            tp: ErrorCode.group_subscribed_to_topic if tp[0] in subscribed else NONE for tp in partitions
        }
        commits = self.offsets.for_group(group_id)
        self.offsets.delete(
            [CommitKey(group_id, t, p) for (t, p), e in errors.items() if not e and (t, p) in commits]
        )
        return errors

    def commit(self, group_id: str, commits: dict[tuple[str, int], CommittedOffset]) -> None:
        self.offsets.commit(group_id, commits)
