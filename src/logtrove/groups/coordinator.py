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
version; this module knows nothing of the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from logtrove.groups.offsets import CommitKey, CommittedOffset, OffsetStore

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

    @property
    def deadline(self) -> float:
        """When the session ends without a heartbeat (on the :func:`_now` clock)."""
        return self.last_seen + self.session_timeout_ms / 1000

    def update(self, request: Member) -> None:
        """Take a JoinGroup's protocols and timeouts (``request`` is the member as the
        JoinGroup describes it)."""
        self.protocols = request.protocols
        self.session_timeout_ms = request.session_timeout_ms
        self.rebalance_timeout_ms = request.rebalance_timeout_ms
        self.last_seen = _now()


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
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
        """Expire each session at its deadline, as Kafka's heartbeat timers do (a
        deadline only moves later, and a new one is at least the minimum session timeout
        away, more than one ``REAP_INTERVAL_S``)."""
        while True:
            deadline = self.expire_sessions()
            await asyncio.sleep(min(max(deadline - _now(), 0.0) + DEADLINE_SLACK_S, REAP_INTERVAL_S))

    def expire_sessions(self) -> float:
        """Remove members whose session timed out (and pending IDs never used); returns
        the next session deadline (``inf`` when there is none)."""
        now = _now()
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
            self._expire(group, _now())
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
            return _join_error(INVALID_GROUP_ID, member_id)
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            return _join_error(INVALID_SESSION_TIMEOUT, member_id)
        request = Member(  # the joining member as the request describes it, ID to be settled
            member_id,
            group_instance_id or None,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
        )
        group = self.groups.setdefault(group_id, Group(group_id))
        if group.members and (
            protocol_type != group.protocol_type or not self._common_protocols(group, protocols)
        ):
            return _join_error(INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not member_id:
            return await self._join_new(group, request, require_known_member_id)
        if group.pending.pop(member_id, None) is not None:
            return await self._await_join(group, self._add_member(group, member_id, request))
        error = group.validate_member(member_id, request.group_instance_id)
        if error:
            return _join_error(error, member_id)
        return await self._rejoin(group, group.members[member_id], request)

    async def _join_new(self, group: Group, request: Member, require_known_member_id: bool) -> dict[str, Any]:
        """A JoinGroup without a member ID: a new member, or a restarted static one."""
        instance = request.group_instance_id
        member_id = f"{instance or request.client_id or 'member'}-{uuid.uuid4()}"
        if instance is not None and instance in group.static:
            return await self._replace_static(group, group.static[instance], member_id, request)
        if instance is None and require_known_member_id:
            group.pending[member_id] = _now() + request.session_timeout_ms / 1000
            return _join_error(MEMBER_ID_REQUIRED, member_id)
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
        _answer(old.join_future, _join_error(FENCED_INSTANCE_ID, old_id))
        _answer(old.sync_future, _sync_error(FENCED_INSTANCE_ID))
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
        _answer(member.join_future, _join_error(REBALANCE_IN_PROGRESS, member.member_id))
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
            _answer(member.sync_future, _sync_error(REBALANCE_IN_PROGRESS))
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
        """Completes the join phase at the rebalance timeout (or after the initial delay);
        when nobody rejoined (only absent static members are left) it waits another
        rebalance timeout, until they rejoin or their sessions time out."""
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
            group.state, group.protocol, group.leader, group.protocol_type = EMPTY, None, None, None
            return True
        if group.leader not in joined:
            group.leader = joined[0]
        group.protocol = self._select_protocol(group)
        group.state = COMPLETING
        for member in group.members.values():
            future, member.join_future = member.join_future, None
            member.last_seen = _now()
            _answer(
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
        group.members[member_id].last_seen = _now()
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
            return _sync_error(error)
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(protocol_name, group.protocol):
            return _sync_error(INCONSISTENT_GROUP_PROTOCOL)
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
                _answer(m.sync_future, self._sync_result(group, m))
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
        _answer(member.join_future, _join_error(UNKNOWN_MEMBER_ID, member_id))
        _answer(member.sync_future, _sync_error(UNKNOWN_MEMBER_ID))
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
            group.members[member_id].last_seen = _now()
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


def _answer(future: asyncio.Future[dict[str, Any]] | None, result: dict[str, Any]) -> None:
    """Complete a parked JoinGroup / SyncGroup, if one is still waiting."""
    if future is not None and not future.done():
        future.set_result(result)


def _inconsistent(asked: str | None, chosen: str | None) -> bool:
    """Whether a SyncGroup (v5+) names another protocol type or name than the group's."""
    return asked is not None and chosen is not None and asked != chosen


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
