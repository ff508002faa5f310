"""The classic consumer-group protocol's state: a group and its members, the protocol's
constants (error codes, states, session bounds) and the answers :class:`~logtrove.groups.coordinator.GroupCoordinator`
builds from them.

Times (``Member.last_seen``, ``Group.pending``, ``Group.initial_deadline``) are on the
coordinator's monotonic clock (its ``monotonic`` argument, :func:`time.monotonic` by default).
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

NONE = ErrorCode.none
ILLEGAL_GENERATION = ErrorCode.illegal_generation
INCONSISTENT_GROUP_PROTOCOL = ErrorCode.inconsistent_group_protocol
INVALID_GROUP_ID = ErrorCode.invalid_group_id
UNKNOWN_MEMBER_ID = ErrorCode.unknown_member_id
INVALID_SESSION_TIMEOUT = ErrorCode.invalid_session_timeout
REBALANCE_IN_PROGRESS = ErrorCode.rebalance_in_progress
MEMBER_ID_REQUIRED = ErrorCode.member_id_required
FENCED_INSTANCE_ID = ErrorCode.fenced_instance_id
GROUP_ID_NOT_FOUND = ErrorCode.group_id_not_found
NON_EMPTY_GROUP = ErrorCode.non_empty_group
GROUP_SUBSCRIBED_TO_TOPIC = ErrorCode.group_subscribed_to_topic

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

REAP_INTERVAL_S = 0.25  # the reaper's longest sleep (pending member IDs expire on it)
DEADLINE_SLACK_S = 0.001  # wake just past a deadline, not a clock tick before it
MIN_SESSION_TIMEOUT_MS = 1_000
MAX_SESSION_TIMEOUT_MS = 1_800_000


@dataclass
class Member:
    """One member of a group, with its pending JoinGroup / SyncGroup answers."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_seen: float = 0.0  # on the coordinator's clock, set by the JoinGroup
    join_future: asyncio.Future[dict[str, Any]] | None = None
    sync_future: asyncio.Future[dict[str, Any]] | None = None

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")

    @property
    def deadline(self) -> float:
        """When the session ends without a heartbeat (on the coordinator's clock)."""
        return self.last_seen + self.session_timeout_ms / 1000

    def update(self, request: Member) -> None:
        """Take a JoinGroup's protocols and timeouts (``request`` is the member as the
        JoinGroup describes it, stamped with the time of the JoinGroup)."""
        self.protocols = request.protocols
        self.session_timeout_ms = request.session_timeout_ms
        self.rebalance_timeout_ms = request.rebalance_timeout_ms
        self.last_seen = request.last_seen


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    # Set by the first member to join; kept when the group empties (as Kafka keeps it), so
    # DescribeGroups tells an empty consumer group from a simple one (offsets only).
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # group instance ID -> member ID
    pending: dict[str, float] = field(default_factory=dict)  # member IDs handed out, not yet joined
    rebalance_task: asyncio.Task[None] | None = None
    initial_deadline: float = 0.0

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``validateMember``: an instance ID must map to exactly this member ID
        (else ``FENCED_INSTANCE_ID``: an older process of the instance), and the member
        must exist."""
        if group_instance_id is not None:
            current = self.static.get(group_instance_id)
            if current is None:
                return UNKNOWN_MEMBER_ID
            if current != member_id:
                return FENCED_INSTANCE_ID
        return NONE if member_id in self.members else UNKNOWN_MEMBER_ID


def subscribed_topics(metadata: bytes) -> set[str]:
    """The topics of a consumer's subscription (the ``consumer`` protocol's member
    metadata: ``version i16 | [topics] (i32 count, then i16 length + UTF-8 each) | …``);
    a member whose metadata does not parse subscribes, as far as we can tell, to
    nothing."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, set()
        for _ in range(max(0, min(count, len(metadata)))):
            (length,) = struct.unpack_from(">h", metadata, pos)
            topics.add(metadata[pos + 2 : pos + 2 + length].decode("utf-8"))
            pos += 2 + length
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


def answer(future: asyncio.Future[dict[str, Any]] | None, result: dict[str, Any]) -> None:
    """Complete a parked JoinGroup / SyncGroup, if one is still waiting."""
    if future is not None and not future.done():
        future.set_result(result)


def inconsistent(asked: str | None, chosen: str | None) -> bool:
    """Whether a SyncGroup (v5+) names another protocol type or name than the group's."""
    return asked is not None and chosen is not None and asked != chosen


def join_error(code: int, member_id: str) -> dict[str, Any]:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_name": None,
        "leader": "",
        "member_id": member_id,
        "members": [],
    }


def sync_error(code: int) -> dict[str, Any]:
    return {"error_code": code, "assignment": b""}
