"""The consumer group protocol (KIP-848, Kafka 4.0): ConsumerGroupHeartbeat's semantics.

Members do not rebalance together: each heartbeat carries the member's epoch, its
subscription (when it changed) and the partitions it owns; the answer carries its epoch
and, when it changed, the partitions it may now own. The assignment is computed here,
by a server-side assignor (:mod:`.assignors`). The epochs, states and invariant are
described in :mod:`.consumer_state`.

One heartbeat, in order (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``):

1. a leave (member epoch -1; -2 for a static member that will come back, which keeps
   its partitions until its session times out) is done at once (the broker sends its
   answer once the state file holds it, :meth:`ConsumerGroups.saved`);
2. the member is found or created: epoch 0 joins (a known member ID rejoining starts
   over, its partitions released; a static member's new process takes over the old
   one's place if the old one left with -2, else ``UNRELEASED_INSTANCE_ID``); any other
   epoch must name a known member (``UNKNOWN_MEMBER_ID``) at its current epoch, or at the
   previous one when it owns no more than it was given (a lost answer), else
   ``FENCED_MEMBER_EPOCH``;
3. a changed subscription, a new member, or a change of the subscribed topics bumps the
   group epoch, and the target assignment is computed again. Regexes are resolved
   apart, as Kafka does (:meth:`ConsumerGroups.resolve_regexes`): a new regex counts
   for nothing until it is resolved, right after the heartbeat that brought it, so the
   member gets its literal topics first and the matched ones on a later heartbeat;
4. the member moves towards its target (:meth:`ConsumerGroups._reconcile`).

A member whose heartbeats stop for the session timeout is removed, and so is one that
does not revoke within its rebalance timeout; their partitions are free for others.

Results carry Kafka's error codes (kio's :class:`~kio.schema.errors.ErrorCode`); topics
are names here (the broker maps topic IDs), and this module knows nothing of the network.
The request and answer types and their validation are in :mod:`.consumer_heartbeat`
(re-exported here), the target assignment's inputs and the ``TopicPartitions`` set
algebra in :mod:`.consumer_target`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path

from kio.schema.errors import ErrorCode

from logtrove.groups.assignors import ASSIGNORS, matching_topics
from logtrove.groups.consumer_admin import ConsumerGroupAdmin
from logtrove.groups.consumer_heartbeat import (
    LEAVE_EPOCH,
    MAX_MEMBERS,
    STATIC_LEAVE_EPOCH,
    Heartbeat,
    HeartbeatError,
    HeartbeatResult,
    check_choices,
    check_heartbeat,
)
from logtrove.groups.consumer_state import (
    STABLE,
    STATE_FILE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerMember,
    TopicPartitions,
    encode_groups,
    load_groups,
    now,
    save_groups,
)
from logtrove.groups.consumer_target import (
    copy,
    forget_unused_regexes,
    group_assignor,
    intersect,
    minus,
    nonempty,
    overlaps,
    subscription,
    within,
)
from logtrove.groups.offsets import OffsetStore

__all__ = ["ConsumerGroups", "Heartbeat", "HeartbeatError", "HeartbeatResult", "check_heartbeat"]

NONE = ErrorCode.none


class ConsumerGroups(ConsumerGroupAdmin):
    """Every consumer-protocol group of the broker; persisted in ``consumer-groups.json``
    of ``data_dir`` (see :mod:`.consumer_state`). ``topics`` returns the existing topics
    and their partition counts; committed offsets go to the shared :class:`OffsetStore`.
    The commit, fetch and admin checks come from :class:`ConsumerGroupAdmin`."""

    def __init__(
        self,
        offsets: OffsetStore,
        data_dir: Path,
        topics: Callable[[], Mapping[str, int]],
        *,
        session_timeout_ms: int = 45_000,
        session_timeout_of: Callable[[str], int] | None = None,
        clock: Callable[[], float] = now,
    ) -> None:
        """``session_timeout_of(group_id)``: a group's own session timeout in ms (its GROUP
        config, :mod:`.group_configs`); without it every group has ``session_timeout_ms``."""
        self.offsets = offsets
        self.path = data_dir / STATE_FILE
        self.topics = topics
        self.session_timeout = session_timeout_ms / 1000
        self._session_timeout_of = session_timeout_of
        self.clock = clock
        self.groups: dict[str, ConsumerGroup] = load_groups(self.path)
        self.dirty = False
        self._topics: dict[str, int] = {}
        self._topics_version = 0
        for member in self._all_members():  # sessions and revocation deadlines start anew
            member.last_seen = clock()
            member.revocation_deadline = clock() + member.rebalance_timeout_ms / 1000
        self._task: asyncio.Task[None] | None = None
        self._saving: asyncio.Future[None] | None = None
        self._waiting: list[asyncio.Future[None]] = []  # see saved()
        self._wake = asyncio.Event()
        self.resolve_regexes()  # as they were before the restart: no member loses a topic

    def _all_members(self) -> list[ConsumerMember]:
        return [m for g in self.groups.values() for m in g.members.values()]

    # -- persistence ----------------------------------------------------------------
    def snapshot(self) -> bytes | None:
        """The state file's new content if anything changed since the last snapshot."""
        if not self.dirty:
            return None
        self.dirty = False
        return encode_groups(self.groups)

    def save(self, data: bytes) -> None:
        save_groups(self.path, data)

    def start(self, interval_s: float = 0.25) -> None:
        """Expire sessions and write changed state every ``interval_s`` on the running
        loop (and at once when :meth:`saved` asks), until :meth:`stop`."""
        self._wake = asyncio.Event()  # of this loop
        self._task = asyncio.get_running_loop().create_task(self._run(interval_s), name="consumer-groups")

    async def _run(self, interval_s: float) -> None:
        """The file write runs in a worker thread; a crash loses at most the changes of
        one interval, after which the members concerned are fenced and rejoin (changes
        answered through :meth:`saved` are never lost)."""
        while True:
            with contextlib.suppress(TimeoutError):  # a pass every interval, or at once for saved()
                await asyncio.wait_for(self._wake.wait(), interval_s)
            self._wake.clear()
            self.resolve_regexes()
            self.expire()
            waiting, self._waiting = self._waiting, []  # their changes are in this snapshot
            data = self.snapshot()
            if data is not None:
                self._saving = asyncio.ensure_future(asyncio.to_thread(self.save, data))
                try:
                    await asyncio.shield(self._saving)
                except asyncio.CancelledError:
                    self._waiting[:0] = waiting  # stop() answers them once the write is done
                    raise
                except Exception:
                    _release(waiting)  # a failed write stops the writer; nobody waits forever
                    raise
            _release(waiting)

    async def saved(self) -> None:
        """Return once the state as it is now is in the file: the writer makes a pass at
        once (after the write under way, if any; at once when the writer does not run).
        A leave is answered only then, as Kafka answers a heartbeat only once its records are
        written: an acknowledged leave survives a crash (else the member would hold its
        partitions for a whole session after the restart), and the answer cannot overtake
        the client's own handling of its leave (librdkafka 2.11 loses its rejoin state
        when the answer to a max.poll.interval.ms leave comes back within a millisecond,
        then rejoins with an invalid heartbeat, which is fatal for the consumer)."""
        if self._task is None or self._task.done():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        self._wake.set()
        await waiter

    async def stop(self) -> None:
        """Stop the loop, let a write under way finish (so it cannot land after the last
        one), and write the state a last time."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._saving is not None:
            await self._saving
        waiting, self._waiting = self._waiting, []
        try:
            data = self.snapshot()
            if data is not None:
                self.save(data)
        finally:
            _release(waiting)

    # -- heartbeat ------------------------------------------------------------------
    def heartbeat(self, request: Heartbeat) -> HeartbeatResult:
        try:
            return self._heartbeat(request)
        except HeartbeatError as exc:
            return HeartbeatResult(exc.error, str(exc), request.member_id, request.member_epoch)

    def _heartbeat(self, request: Heartbeat) -> HeartbeatResult:
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request)
        check_choices(request)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_epoch != 0:
                raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {request.group_id} not found.")
            group = self.groups[request.group_id] = ConsumerGroup(request.group_id)
        member, changed = self._member(group, request)
        member.last_seen = self.clock()
        before = (member.member_epoch, copy(member.assigned))
        fingerprint = (group.group_epoch, member.state, copy(member.revoking))
        changed |= self._update_subscription(member, request)
        if changed:
            group.group_epoch += 1
            forget_unused_regexes(group)
        self._refresh_target(group)
        self._reconcile(group, member, request.owned)
        after = (member.member_epoch, member.assigned)
        if changed or before != after or fingerprint != (group.group_epoch, member.state, member.revoking):
            self.dirty = True
        send = request.member_epoch == 0 or before != after
        send |= request.owned is not None and request.owned != nonempty(member.assigned)
        return HeartbeatResult(
            NONE, None, member.member_id, member.member_epoch, copy(member.assigned) if send else None
        )

    def _member(self, group: ConsumerGroup, request: Heartbeat) -> tuple[ConsumerMember, bool]:
        """The member the heartbeat is from, and whether it is new to the group."""
        member = group.members.get(request.member_id)
        if request.member_epoch == 0:
            return self._join(group, member, request)
        if member is None:
            raise HeartbeatError(ErrorCode.unknown_member_id, f"Unknown member {request.member_id}.")
        if request.instance_id is not None and member.instance_id != request.instance_id:
            raise HeartbeatError(ErrorCode.fenced_instance_id, "The instance ID belongs to another member.")
        epoch = request.member_epoch
        owned = request.owned
        if epoch == member.member_epoch:
            return member, False
        lost_answer = (
            epoch == member.previous_member_epoch and owned is not None and within(owned, member.assigned)
        )
        if epoch > member.member_epoch or not lost_answer:
            raise HeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The member epoch {epoch} is not the current one ({member.member_epoch}).",
            )
        return member, False

    def _join(
        self, group: ConsumerGroup, member: ConsumerMember | None, request: Heartbeat
    ) -> tuple[ConsumerMember, bool]:
        """Epoch 0: a new member, a known one starting over, or a static member's new process."""
        instance = request.instance_id
        holder = group.member_of_instance(instance) if instance is not None else None
        if holder is not None and holder.member_id != request.member_id:
            if holder.member_epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(
                    ErrorCode.unreleased_instance_id, f"Instance {instance} is still used by another member."
                )
            return self._replace_static(group, holder, request), False
        if member is not None:  # rejoining (after being fenced): it released what it had
            member.assigned, member.revoking, member.state = {}, {}, STABLE
            member.member_epoch, member.previous_member_epoch = 0, -1
            return member, False
        if len(group.members) >= MAX_MEMBERS:
            raise HeartbeatError(ErrorCode.group_max_size_reached, f"The group has {MAX_MEMBERS} members.")
        member = group.members[request.member_id] = ConsumerMember(
            request.member_id,
            client_id=request.client_id,
            client_host=request.client_host,
            instance_id=instance,
        )
        return member, True

    def _replace_static(
        self, group: ConsumerGroup, old: ConsumerMember, request: Heartbeat
    ) -> ConsumerMember:
        """The new process of a static member that left with -2 takes its place, its
        partitions and its epoch, under the new member ID; the group epoch stays."""
        old_id, new_id = old.member_id, request.member_id
        del group.members[old_id]
        old.member_id = new_id
        old.member_epoch = max(old.previous_member_epoch, 0)
        old.client_id, old.client_host = request.client_id, request.client_host
        group.members[new_id] = old
        group.target = {(new_id if m == old_id else m): t for m, t in group.target.items()}
        return old

    def _update_subscription(self, member: ConsumerMember, request: Heartbeat) -> bool:
        """Take the heartbeat's non-null fields; whether the subscription changed."""
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        changed = False
        if request.subscribed_topic_names is not None:
            names = frozenset(request.subscribed_topic_names)
            changed |= names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if request.subscribed_topic_regex is not None:
            regex = request.subscribed_topic_regex or None
            changed |= regex != member.subscribed_topic_regex
            member.subscribed_topic_regex = regex
        if request.server_assignor is not None:
            changed |= request.server_assignor != member.server_assignor
            member.server_assignor = request.server_assignor
        if request.describable != member.describable:  # an ACL or a topic came or went
            changed |= member.subscribed_topic_regex is not None
            member.describable = request.describable
        return changed

    # -- target assignment ------------------------------------------------------------
    def _refresh_target(self, group: ConsumerGroup) -> None:
        """Bump the group epoch when the subscribed topics changed, then compute the
        target assignment if it is older than the group epoch."""
        topics, version = self._current_topics()
        if group.resolved_for == (version, group.group_epoch):
            return  # nothing the subscriptions depend on changed since the last time
        subscriptions = {m.member_id: subscription(group, m, topics) for m in group.members.values()}
        subscribed = {t: topics[t] for names in subscriptions.values() for t in names}
        if subscribed != group.subscribed:
            group.subscribed = subscribed
            group.group_epoch += 1
        group.resolved_for = (version, group.group_epoch)
        if group.assignment_epoch >= group.group_epoch:
            return
        self.dirty = True
        group.assignor = group_assignor(group)
        group.target = ASSIGNORS[group.assignor](subscriptions, subscribed, group.target)
        group.assignment_epoch = group.group_epoch

    def _current_topics(self) -> tuple[dict[str, int], int]:
        """The existing topics, and a version that moves whenever they change."""
        topics = dict(self.topics())
        if topics != self._topics:
            self._topics, self._topics_version = topics, self._topics_version + 1
        return self._topics, self._topics_version

    def resolve_regexes(self) -> None:
        """Resolve the groups' regexes that are new, or all of them when the topics
        changed; a group whose matches changed computes its target again (the members
        take it on their next heartbeats). Kafka resolves them apart from heartbeats in
        the same way, which keeps regex matching out of heartbeats (a heartbeat still reads
        the topic list: one dict of names and partition counts)."""
        topics, version = self._current_topics()
        for group in self.groups.values():
            wanted = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
            if set(group.regex_topics) == wanted and group.regexes_for == version:
                continue
            fresh = {r: matching_topics(r, topics) for r in wanted}
            group.regexes_for = version
            if fresh != group.regex_topics:
                group.regex_topics = fresh
                group.resolved_for = None
                self._refresh_target(group)

    # -- reconciliation -------------------------------------------------------------
    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: TopicPartitions | None) -> None:
        """Move the member one step towards its target (see :mod:`.consumer_state`)."""
        target = group.target.get(member.member_id, {})
        if member.state == UNREVOKED_PARTITIONS:
            if owned is None or overlaps(owned, member.revoking):
                return  # still revoking
            member.revoking = {}
        elif member.member_epoch == group.assignment_epoch and member.state == STABLE:
            return
        elif member.member_epoch == group.assignment_epoch:  # UNRELEASED: take what was freed
            self._take_free(group, member, target)
            return
        kept = intersect(member.assigned, target)
        revoke = minus(member.assigned, target)
        if revoke:
            member.assigned, member.revoking, member.state = kept, revoke, UNREVOKED_PARTITIONS
            member.revocation_deadline = self.clock() + member.rebalance_timeout_ms / 1000
            return
        member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        self._take_free(group, member, target)

    def _take_free(self, group: ConsumerGroup, member: ConsumerMember, target: TopicPartitions) -> None:
        for topic, partitions in target.items():
            free = partitions - group.owned_elsewhere(topic, member.member_id)
            if free:
                member.assigned.setdefault(topic, set()).update(free)
        member.state = STABLE if nonempty(member.assigned) == nonempty(target) else UNRELEASED_PARTITIONS

    # -- leaving --------------------------------------------------------------------
    def _leave(self, request: Heartbeat) -> HeartbeatResult:
        group = self.groups.get(request.group_id)
        if group is None:
            raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {request.group_id} not found.")
        member = group.members.get(request.member_id)
        if member is None and request.instance_id is not None:
            member = group.member_of_instance(request.instance_id)
        if member is None:
            raise HeartbeatError(ErrorCode.unknown_member_id, f"Unknown member {request.member_id}.")
        self.dirty = True
        if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
        else:
            self.remove_member(group, member.member_id)
        return HeartbeatResult(NONE, None, request.member_id, request.member_epoch)

    def remove_member(self, group: ConsumerGroup, member_id: str) -> None:
        """Drop a member; its partitions are free, and the group epoch moves."""
        del group.members[member_id]
        group.target.pop(member_id, None)
        forget_unused_regexes(group)
        group.group_epoch += 1
        self.dirty = True
        if group.members:
            self._refresh_target(group)

    def expire(self) -> list[tuple[str, str]]:
        """Remove the members whose session timed out or who did not revoke in time;
        returns their (group, member) IDs."""
        t = self.clock()
        return [gone for group in list(self.groups.values()) for gone in self._expire(group, t)]

    def _expire(self, group: ConsumerGroup, t: float) -> list[tuple[str, str]]:
        """:meth:`expire` for one group; ConsumerGroupDescribe, DeleteGroups and
        OffsetDelete call it first, so that what they see does not depend on when the
        writer loop last ran."""
        session = self.session_timeout
        if self._session_timeout_of is not None and group.members:
            session = self._session_timeout_of(group.group_id) / 1000
        gone = []
        for member in list(group.members.values()):
            late = member.state == UNREVOKED_PARTITIONS and t > member.revocation_deadline
            if late or t - member.last_seen >= session:
                self.remove_member(group, member.member_id)
                gone.append((group.group_id, member.member_id))
        return gone

    def current(self, group_id: str) -> ConsumerGroup | None:
        """The group with its timed-out members removed."""
        group = self.groups.get(group_id)
        if group is not None:
            self._expire(group, self.clock())
        return group


def _release(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
