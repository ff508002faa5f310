"""The group coordinator: Kafka's classic consumer-group protocol on one event loop.

States of a group, as in Kafka::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                  ▲        │                                   │ leader's SyncGroup
      │   last member    │ join / leave / session timeout            ▼
      └──────────────────┴───────────────────────────────────── Stable

* A JoinGroup without a member ID (v4+) is answered ``MEMBER_ID_REQUIRED`` with a new ID,
  which the client sends back in a second JoinGroup.
* A rebalance completes when every known member has rejoined, or when the largest
  rebalance timeout passes (dynamic members that did not rejoin are dropped). The first
  rebalance of an empty group waits ``initial_rebalance_delay_ms`` more (extended by
  each new member, bounded by the rebalance timeout) so that members starting together
  land in one generation. Generations start at 1.
* The leader (the first member) receives every member's protocol metadata, computes the
  assignment on the client side and sends it in its SyncGroup; the others wait for it.
* A known member that rejoins a Stable group with unchanged metadata (and is not the
  leader), or a CompletingRebalance group with unchanged metadata, is answered at once
  with the current generation; anything else starts a rebalance.
* A member whose heartbeats stop for its session timeout is removed (a rebalance follows),
  at its deadline; the admin APIs (describe, list, delete) expire due sessions first.

Static membership (KIP-345, JoinGroup v5+ ``group.instance.id``): a static member joins
without ``MEMBER_ID_REQUIRED``, and the group maps its instance ID to its member ID. When
the instance joins again with no member ID (a restarted process), it gets a new member ID
in place of the old one and keeps the old one's assignment; in a Stable group whose
selected protocol does not change, the answer comes at once with the current generation
and the old leader's ID, so nobody rebalances and the member simply syncs its assignment.
Requests that name the instance with another member ID (the old process) are answered
``FENCED_INSTANCE_ID``. A static member that does not rejoin a rebalance keeps its place
until its session times out; LeaveGroup v3+ can remove it by instance ID alone.

OffsetCommit follows Kafka's ``validateOffsetCommit``: a current member of the current
generation may commit while the group is Stable or PreparingRebalance (members commit in
their revoke callbacks, before rejoining); CompletingRebalance answers
``REBALANCE_IN_PROGRESS``.

Results are plain dicts with Kafka's field names and error codes (kio's
:class:`~kio.schema.errors.ErrorCode`), so the broker can encode them for any protocol
version; this module knows nothing of the network. A group's state and these answers
are in :mod:`.classic_state`; OffsetCommit's checks, listing and administration in
:mod:`.classic_admin`. Session deadlines and rebalance timers read the coordinator's
``monotonic`` clock (:func:`time.monotonic` unless a test passes another).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from logtrove.groups.classic_admin import ClassicGroupAdmin
from logtrove.groups.classic_state import (
    COMPLETING,
    DEADLINE_SLACK_S,
    EMPTY,
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MAX_SESSION_TIMEOUT_MS,
    MEMBER_ID_REQUIRED,
    MIN_SESSION_TIMEOUT_MS,
    NONE,
    PREPARING,
    REAP_INTERVAL_S,
    REBALANCE_IN_PROGRESS,
    STABLE,
    UNKNOWN_MEMBER_ID,
    Group,
    Member,
    answer,
    inconsistent,
    join_error,
    sync_error,
)
from logtrove.groups.offsets import OffsetStore


class GroupCoordinator(ClassicGroupAdmin):
    """Every group of the broker, and their committed offsets (via :class:`OffsetStore`).

    ``monotonic`` is the clock of session deadlines and rebalance timers (seconds,
    :func:`time.monotonic` by default); a test may pass one it moves by hand.
    OffsetCommit's checks and the listing and admin APIs come from
    :class:`ClassicGroupAdmin`."""

    def __init__(
        self,
        offsets: OffsetStore,
        *,
        initial_rebalance_delay_ms: int = 3000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.offsets = offsets
        self._now = monotonic
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
        """Expire each session at its deadline, as Kafka's heartbeat timers do (a
        deadline only moves later, and a new one is at least the minimum session timeout
        away, more than one ``REAP_INTERVAL_S``)."""
        while True:
            deadline = self.expire_sessions()
            await asyncio.sleep(min(max(deadline - self._now(), 0.0) + DEADLINE_SLACK_S, REAP_INTERVAL_S))

    def expire_sessions(self) -> float:
        """Remove members whose session timed out (and pending IDs never used); returns
        the next session deadline (``inf`` when there is none)."""
        now = self._now()
        deadlines = [self._expire(group, now) for group in list(self.groups.values())]
        return min(deadlines, default=math.inf)

    def _expire(self, group: Group, now: float) -> float:
        """:meth:`expire_sessions` for one group; the admin APIs call it before they
        look at a group, so that what they see does not depend on when the reaper last
        ran (a static member closed ``session.timeout.ms`` ago is gone for DeleteGroups,
        as in Kafka)."""
        group.pending = {m: t for m, t in group.pending.items() if t > now}
        waiting = [m for m in group.members.values() if m.join_future is None]
        for member in waiting:  # a removal may complete a join, which drops absent dynamic members
            if now >= member.deadline and member.member_id in group.members:
                self._remove_member(group, member.member_id)
        return min((m.deadline for m in waiting if m.member_id in group.members), default=math.inf)

    def _group_now(self, group_id: str) -> Group | None:
        """The group with its timed-out sessions expired."""
        group = self.groups.get(group_id)
        if group is not None:
            self._expire(group, self._now())
        return group

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
            return join_error(INVALID_GROUP_ID, member_id)
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            return join_error(INVALID_SESSION_TIMEOUT, member_id)
        request = Member(  # the joining member as the request describes it, ID to be settled
            member_id,
            group_instance_id or None,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            last_seen=self._now(),
        )
        group = self.groups.setdefault(group_id, Group(group_id))
        if group.members and (
            protocol_type != group.protocol_type or not self._common_protocols(group, protocols)
        ):
            return join_error(INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not member_id:
            return await self._join_new(group, request, require_known_member_id)
        if group.pending.pop(member_id, None) is not None:
            return await self._await_join(group, self._add_member(group, member_id, request))
        error = group.validate_member(member_id, request.group_instance_id)
        if error:
            return join_error(error, member_id)
        return await self._rejoin(group, group.members[member_id], request)

    async def _join_new(self, group: Group, request: Member, require_known_member_id: bool) -> dict[str, Any]:
        """A JoinGroup without a member ID: a new member, or a restarted static one."""
        instance = request.group_instance_id
        member_id = f"{instance or request.client_id or 'member'}-{uuid.uuid4()}"
        if instance is not None and instance in group.static:
            return await self._replace_static(group, group.static[instance], member_id, request)
        if instance is None and require_known_member_id:
            group.pending[member_id] = self._now() + request.session_timeout_ms / 1000
            return join_error(MEMBER_ID_REQUIRED, member_id)
        return await self._await_join(group, self._add_member(group, member_id, request))

    def _add_member(self, group: Group, member_id: str, request: Member) -> Member:
        member = group.members[member_id] = dataclasses.replace(request, member_id=member_id)
        if request.group_instance_id is not None:
            group.static[request.group_instance_id] = member_id
        if group.leader is None:
            group.leader = member_id
        group.protocol_type = request.protocol_type
        return member

    async def _rejoin(self, group: Group, member: Member, request: Member) -> dict[str, Any]:
        """Kafka's join of a known member: the current generation at once when nothing
        changed (a follower of a Stable group, anyone while CompletingRebalance), else a
        rebalance."""
        unchanged = member.protocols == request.protocols
        member.update(request)
        if unchanged and group.state == COMPLETING:
            return self._joined(group, member.member_id, group.leader, member.member_id == group.leader)
        if unchanged and group.state == STABLE and member.member_id != group.leader:
            return self._joined(group, member.member_id, group.leader, False)
        return await self._await_join(group, member)

    async def _replace_static(
        self, group: Group, old_id: str, new_id: str, request: Member
    ) -> dict[str, Any]:
        """A static member's new process takes over the old member ID's place and
        assignment; the old ID is fenced. No rebalance in a Stable group whose selected
        protocol stays: the answer names the previous leader (so a member that led does
        not recompute an assignment the group would not take) and the member syncs."""
        leader = group.leader
        old = group.members[old_id]
        answer(old.join_future, join_error(FENCED_INSTANCE_ID, old_id))
        answer(old.sync_future, sync_error(FENCED_INSTANCE_ID))
        member = dataclasses.replace(request, member_id=new_id, assignment=old.assignment)
        group.members = {
            (new_id if k == old_id else k): (member if k == old_id else m) for k, m in group.members.items()
        }
        group.static[str(request.group_instance_id)] = new_id
        if group.leader == old_id:
            group.leader = new_id
        if group.state == STABLE and self._select_protocol(group) == group.protocol:
            return self._joined(group, new_id, leader, False)
        return await self._await_join(group, member)

    async def _await_join(self, group: Group, member: Member) -> dict[str, Any]:
        """Park the member's JoinGroup until the join phase completes (starting a
        rebalance unless one is under way)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        answer(member.join_future, join_error(REBALANCE_IN_PROGRESS, member.member_id))
        member.join_future = future
        self._prepare_rebalance(group, new_member=True)
        self._maybe_complete_join(group)
        return await future

    def _joined(self, group: Group, member_id: str, leader: str | None, with_members: bool) -> dict[str, Any]:
        """A successful JoinGroup answer for the current generation."""
        return {
            "error_code": NONE,
            "generation_id": group.generation,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol,
            "leader": leader or "",
            "member_id": member_id,
            "members": self._member_list(group) if with_members else [],
        }

    def _member_list(self, group: Group) -> list[dict[str, Any]]:
        return [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata_for(group.protocol),
            }
            for m in group.members.values()
        ]

    def _common_protocols(self, group: Group, protocols: list[tuple[str, bytes]]) -> set[str]:
        names = {n for n, _ in protocols}
        for member in group.members.values():
            names &= {n for n, _ in member.protocols}
        return names

    def _select_protocol(self, group: Group) -> str | None:
        """The leader's most preferred protocol among those every member supports."""
        leader = group.members.get(group.leader or "")
        if leader is None:
            return None
        common = self._common_protocols(group, leader.protocols)
        return next((n for n, _ in leader.protocols if n in common), None)

    def _prepare_rebalance(self, group: Group, *, new_member: bool = False) -> None:
        for member in group.members.values():
            answer(member.sync_future, sync_error(REBALANCE_IN_PROGRESS))
            member.sync_future = None
        if group.state == PREPARING:
            if new_member and group.initial_deadline:
                limit = max(m.rebalance_timeout_ms for m in group.members.values()) / 1000
                group.initial_deadline = min(self._now() + self.initial_delay, group.initial_deadline + limit)
            return
        initial = group.state == EMPTY
        group.state = PREPARING
        if group.rebalance_task is not None and not group.rebalance_task.done():
            group.rebalance_task.cancel()  # a timer of an earlier rebalance
        group.initial_deadline = (
            self._now() + self.initial_delay if initial and self.initial_delay > 0 else 0.0
        )
        group.rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_timer(group))

    async def _rebalance_timer(self, group: Group) -> None:
        """Completes the join phase at the rebalance timeout (or after the initial delay);
        when nobody rejoined (only absent static members are left) it waits another
        rebalance timeout, until they rejoin or their sessions time out."""
        started = self._now()
        while group.state == PREPARING:
            timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0) / 1000
            now = self._now()
            if group.initial_deadline and now < group.initial_deadline:
                await asyncio.sleep(min(group.initial_deadline - now, 0.05))
                continue
            if group.initial_deadline:
                group.initial_deadline = 0.0
                self._maybe_complete_join(group)
                continue
            if now - started >= timeout:
                if self._complete_join(group):
                    return
                started = now
            await asyncio.sleep(0.05)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state != PREPARING or group.initial_deadline:
            return
        if all(m.join_future is not None and not m.join_future.done() for m in group.members.values()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> bool:
        """Start the next generation with the members that rejoined (static members that
        did not rejoin keep their place); False when none rejoined but static members
        remain (the join phase goes on)."""
        joined = [m.member_id for m in group.members.values() if m.join_future is not None]
        for member in [m for m in group.members.values() if m.join_future is None]:
            if member.group_instance_id is None:
                del group.members[member.member_id]
        if not joined and group.members:
            return False
        group.generation += 1
        if not group.members:
            group.state, group.protocol, group.leader = EMPTY, None, None
            return True
        if group.leader not in joined:
            group.leader = joined[0]
        group.protocol = self._select_protocol(group)
        group.state = COMPLETING
        for member in group.members.values():
            future, member.join_future = member.join_future, None
            member.last_seen = self._now()
            answer(
                future, self._joined(group, member.member_id, group.leader, member.member_id == group.leader)
            )
        return True

    # -- sync, heartbeat, leave ------------------------------------------------------
    def _check_member(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation: int
    ) -> tuple[Group | None, ErrorCode]:
        group = self.groups.get(group_id)
        if group is None:
            return None, UNKNOWN_MEMBER_ID
        error = group.validate_member(member_id, group_instance_id or None)
        if error:
            return group, error
        if generation != group.generation:
            return group, ILLEGAL_GENERATION
        group.members[member_id].last_seen = self._now()
        return group, NONE

    async def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes],
        *,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> dict[str, Any]:
        group, error = self._check_member(group_id, member_id, group_instance_id, generation)
        if error or group is None:
            return sync_error(error)
        if inconsistent(protocol_type, group.protocol_type) or inconsistent(protocol_name, group.protocol):
            return sync_error(INCONSISTENT_GROUP_PROTOCOL)
        if group.state == PREPARING:
            return sync_error(REBALANCE_IN_PROGRESS)
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
                answer(m.sync_future, self._sync_result(group, m))
                m.sync_future = None
        return await future

    def _sync_result(self, group: Group, member: Member) -> dict[str, Any]:
        return {
            "error_code": NONE,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol,
            "assignment": member.assignment,
        }

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, group_instance_id: str | None = None
    ) -> ErrorCode:
        group, error = self._check_member(group_id, member_id, group_instance_id, generation)
        if error or group is None:
            return error
        return REBALANCE_IN_PROGRESS if group.state == PREPARING else NONE

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None = None) -> ErrorCode:
        """LeaveGroup of one member; v3+ may name a static member by instance ID alone
        (an administrator removing it), and a stale process of a static member is
        ``FENCED_INSTANCE_ID``."""
        group = self.groups.get(group_id)
        instance = group_instance_id or None
        if group is None:
            return UNKNOWN_MEMBER_ID
        if not member_id:
            if instance is None or instance not in group.static:
                return UNKNOWN_MEMBER_ID
            member_id = group.static[instance]
        elif group.pending.pop(member_id, None) is not None:
            return NONE
        else:
            error = group.validate_member(member_id, instance)
            if error:
                return error
        self._remove_member(group, member_id)
        return NONE

    def _remove_member(self, group: Group, member_id: str) -> None:
        member = group.members.pop(member_id)
        if member.group_instance_id is not None and group.static.get(member.group_instance_id) == member_id:
            del group.static[member.group_instance_id]
        answer(member.join_future, join_error(UNKNOWN_MEMBER_ID, member_id))
        answer(member.sync_future, sync_error(UNKNOWN_MEMBER_ID))
        if group.leader == member_id:
            group.leader = next(iter(group.members), None)
        if group.state == PREPARING:
            self._maybe_complete_join(group)
        elif group.members:
            self._prepare_rebalance(group)
        else:
            group.state, group.protocol = EMPTY, None
            group.generation += 1
