"""The group coordinator: Kafka's classic consumer-group protocol on one event loop.

States of a group, as in Kafka::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                  ▲        │                                   │ leader's SyncGroup
      │   last member    │ join / leave / session timeout            ▼
      └──────────────────┴───────────────────────────────────── Stable

* A JoinGroup without a member ID (v4+) is answered ``MEMBER_ID_REQUIRED`` with a new ID,
  which the client sends back in a second JoinGroup.
* A rebalance completes when every known member has rejoined, or when the largest
  rebalance timeout passes (members that did not rejoin are dropped). The first
  rebalance of an empty group waits ``initial_rebalance_delay_ms`` more (extended by
  each new member, bounded by the rebalance timeout) so that members starting together
  land in one generation. Generations start at 1.
* The leader (the first member) receives every member's protocol metadata, computes the
  assignment on the client side and sends it in its SyncGroup; the others wait for it.
* A member whose heartbeats stop for its session timeout is removed (a rebalance follows).

Results are plain dicts with Kafka's field names and error codes, so the broker can
encode them for any protocol version; this module knows nothing of the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from logtrove.groups.offsets import CommittedOffset, OffsetStore

NONE = 0
COORDINATOR_NOT_AVAILABLE = 15
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

MIN_SESSION_TIMEOUT_MS = 1_000
MAX_SESSION_TIMEOUT_MS = 1_800_000


def _now() -> float:
    return time.monotonic()


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
    last_seen: float = field(default_factory=_now)
    join_future: asyncio.Future[dict[str, Any]] | None = None
    sync_future: asyncio.Future[dict[str, Any]] | None = None

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, float] = field(default_factory=dict)  # member IDs handed out, not yet joined
    rebalance_task: asyncio.Task[None] | None = None
    initial_deadline: float = 0.0


class GroupCoordinator:
    """Every group of the broker, and their committed offsets (via :class:`OffsetStore`)."""

    def __init__(self, offsets: OffsetStore, *, initial_rebalance_delay_ms: int = 3000) -> None:
        self.offsets = offsets
        self.initial_delay = initial_rebalance_delay_ms / 1000
        self.groups: dict[str, Group] = {}
        self._reaper: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_loop())

    async def stop(self) -> None:
        tasks = [g.rebalance_task for g in self.groups.values() if g.rebalance_task is not None]
        if self._reaper is not None:
            tasks.append(self._reaper)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            self.expire_sessions()

    def expire_sessions(self) -> None:
        """Remove members whose session timed out (and pending IDs never used)."""
        now = _now()
        for group in list(self.groups.values()):
            group.pending = {m: t for m, t in group.pending.items() if t > now}
            expired = [
                m.member_id
                for m in group.members.values()
                if m.join_future is None and now - m.last_seen > m.session_timeout_ms / 1000
            ]
            for member_id in expired:
                self._remove_member(group, member_id)

    # -- join ------------------------------------------------------------------------
    async def join(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        group_instance_id: str | None = None,
        require_known_member_id: bool = True,
    ) -> dict[str, Any]:
        """JoinGroup; returns the response fields (waits for the rebalance to complete)."""
        if not group_id:
            return _join_error(INVALID_GROUP_ID, member_id)
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            return _join_error(INVALID_SESSION_TIMEOUT, member_id)
        group = self.groups.setdefault(group_id, Group(group_id))
        if group.members and (
            protocol_type != group.protocol_type or not self._common_protocols(group, protocols)
        ):
            return _join_error(INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id:
                group.pending[member_id] = _now() + session_timeout_ms / 1000
                return _join_error(MEMBER_ID_REQUIRED, member_id)
        elif member_id not in group.members and member_id not in group.pending:
            return _join_error(UNKNOWN_MEMBER_ID, member_id)
        group.pending.pop(member_id, None)
        member = group.members.get(member_id)
        if member is None:
            member = Member(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                protocols,
            )
            group.members[member_id] = member
            if group.leader is None:
                group.leader = member_id
        else:
            member.protocols = protocols
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
        group.protocol_type = protocol_type
        member.last_seen = _now()
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(_join_error(REBALANCE_IN_PROGRESS, member_id))
        member.join_future = future
        self._prepare_rebalance(group, new_member=True)
        self._maybe_complete_join(group)
        return await future

    def _common_protocols(self, group: Group, protocols: list[tuple[str, bytes]]) -> set[str]:
        names = {n for n, _ in protocols}
        for member in group.members.values():
            names &= {n for n, _ in member.protocols}
        return names

    def _prepare_rebalance(self, group: Group, *, new_member: bool = False) -> None:
        for member in group.members.values():
            if member.sync_future is not None and not member.sync_future.done():
                member.sync_future.set_result(_sync_error(REBALANCE_IN_PROGRESS))
            member.sync_future = None
        if group.state == PREPARING:
            if new_member and group.initial_deadline:
                limit = max(m.rebalance_timeout_ms for m in group.members.values()) / 1000
                group.initial_deadline = min(_now() + self.initial_delay, group.initial_deadline + limit)
            return
        initial = group.state == EMPTY
        group.state = PREPARING
        if group.rebalance_task is not None and not group.rebalance_task.done():
            group.rebalance_task.cancel()  # a timer of an earlier rebalance
        group.initial_deadline = _now() + self.initial_delay if initial and self.initial_delay > 0 else 0.0
        group.rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_timer(group))

    async def _rebalance_timer(self, group: Group) -> None:
        """Completes the join phase at the rebalance timeout (or after the initial delay)."""
        started = _now()
        while group.state == PREPARING:
            timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0) / 1000
            now = _now()
            if group.initial_deadline and now < group.initial_deadline:
                await asyncio.sleep(min(group.initial_deadline - now, 0.05))
                continue
            if group.initial_deadline:
                group.initial_deadline = 0.0
                self._maybe_complete_join(group)
                continue
            if now - started >= timeout:
                self._complete_join(group)
                return
            await asyncio.sleep(0.05)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state != PREPARING or group.initial_deadline:
            return
        if all(m.join_future is not None and not m.join_future.done() for m in group.members.values()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        for member_id in [m.member_id for m in group.members.values() if m.join_future is None]:
            del group.members[member_id]
        group.generation += 1
        if not group.members:
            group.state, group.protocol, group.leader, group.protocol_type = EMPTY, None, None, None
            return
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        leader = group.members[group.leader]
        common = self._common_protocols(group, leader.protocols)
        group.protocol = next((n for n, _ in leader.protocols if n in common), None)
        group.state = COMPLETING
        all_members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata_for(group.protocol),
            }
            for m in group.members.values()
        ]
        for member in group.members.values():
            future, member.join_future = member.join_future, None
            member.last_seen = _now()
            if future is not None and not future.done():
                future.set_result(
                    {
                        "error_code": NONE,
                        "generation_id": group.generation,
                        "protocol_type": group.protocol_type,
                        "protocol_name": group.protocol,
                        "leader": group.leader,
                        "member_id": member.member_id,
                        "members": all_members if member.member_id == group.leader else [],
                    }
                )

    # -- sync, heartbeat, leave ------------------------------------------------------
    def _check_member(self, group_id: str, member_id: str, generation: int) -> tuple[Group | None, int]:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return group, UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return group, ILLEGAL_GENERATION
        group.members[member_id].last_seen = _now()
        return group, NONE

    async def sync(
        self, group_id: str, member_id: str, generation: int, assignments: dict[str, bytes]
    ) -> dict[str, Any]:
        group, error = self._check_member(group_id, member_id, generation)
        if error or group is None:
            return _sync_error(error)
        if group.state == PREPARING:
            return _sync_error(REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        if group.state == STABLE:
            return self._sync_result(group, member)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        member.sync_future = future
        if member_id == group.leader:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.state = STABLE
            for m in group.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(self._sync_result(group, m))
                m.sync_future = None
        return await future

    def _sync_result(self, group: Group, member: Member) -> dict[str, Any]:
        return {
            "error_code": NONE,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol,
            "assignment": member.assignment,
        }

    def heartbeat(self, group_id: str, member_id: str, generation: int) -> int:
        group, error = self._check_member(group_id, member_id, generation)
        if error or group is None:
            return error
        return REBALANCE_IN_PROGRESS if group.state == PREPARING else NONE

    def leave(self, group_id: str, member_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return UNKNOWN_MEMBER_ID
        self._remove_member(group, member_id)
        return NONE

    def _remove_member(self, group: Group, member_id: str) -> None:
        member = group.members.pop(member_id)
        for fut in (member.join_future, member.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(_join_error(UNKNOWN_MEMBER_ID, member_id))
        if group.leader == member_id:
            group.leader = next(iter(group.members), None)
        if group.state == PREPARING:
            self._maybe_complete_join(group)
        elif group.members:
            self._prepare_rebalance(group)
        else:
            group.state, group.protocol, group.protocol_type = EMPTY, None, None
            group.generation += 1

    # -- offsets ---------------------------------------------------------------------
    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        commits: dict[tuple[str, int], CommittedOffset],
    ) -> int:
        """OffsetCommit: an error code for the whole request, after persisting on success.

        Members of an active group must give their generation; a commit with no member
        (``generation`` -1, as by admin tools and manual-assignment consumers) is accepted
        for a group with no members.
        """
        group = self.groups.get(group_id)
        if group is not None and group.members and (member_id or generation >= 0):
            if member_id not in group.members:
                return UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return ILLEGAL_GENERATION
            if group.state in (PREPARING, COMPLETING):
                return REBALANCE_IN_PROGRESS
            group.members[member_id].last_seen = _now()
        elif group is not None and group.members:
            return UNKNOWN_MEMBER_ID
        self.offsets.commit(group_id, commits)
        return NONE

    def committed(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self.offsets.get(group_id, topic, partition)

    # -- listing ---------------------------------------------------------------------
    def describe(self, group_id: str) -> dict[str, Any]:
        group = self.groups.get(group_id)
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


def _join_error(code: int, member_id: str) -> dict[str, Any]:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_name": None,
        "leader": "",
        "member_id": member_id,
        "members": [],
    }


def _sync_error(code: int) -> dict[str, Any]:
    return {"error_code": code, "assignment": b""}
