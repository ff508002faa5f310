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
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from logtrove.groups.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    InvalidRegexError,
    compile_regex,
    matching_topics,
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
from logtrove.groups.offsets import CommitKey, CommittedOffset, OffsetStore

NONE = ErrorCode.none
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
MAX_MEMBERS = 1000  # per group (Kafka's group.consumer.max.size is unbounded; ours is not)
MAX_SUBSCRIBED_TOPICS = 10_000
MAX_OWNED_PARTITIONS = 100_000


@dataclass(frozen=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat as this module needs it. ``None`` means "unchanged since
    the last heartbeat" for the subscription, assignor and owned partitions, and
    ``rebalance_timeout_ms`` -1 likewise."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicPartitions | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class HeartbeatResult:
    """The answer: ``assignment`` is None when the member's assignment did not change."""

    error: ErrorCode
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    assignment: TopicPartitions | None = None


class HeartbeatError(Exception):
    """An error answer, raised from deep in a heartbeat."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


class ConsumerGroups:
    """Every consumer-protocol group of the broker; persisted in ``consumer-groups.json``
    of ``data_dir`` (see :mod:`.consumer_state`). ``topics`` returns the existing topics
    and their partition counts; committed offsets go to the shared :class:`OffsetStore`."""

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
        _check_choices(request)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_epoch != 0:
                raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {request.group_id} not found.")
            group = self.groups[request.group_id] = ConsumerGroup(request.group_id)
        member, changed = self._member(group, request)
        member.last_seen = self.clock()
        before = (member.member_epoch, _copy(member.assigned))
        fingerprint = (group.group_epoch, member.state, _copy(member.revoking))
        changed |= self._update_subscription(member, request)
        if changed:
            group.group_epoch += 1
            _forget_unused_regexes(group)
        self._refresh_target(group)
        self._reconcile(group, member, request.owned)
        after = (member.member_epoch, member.assigned)
        if changed or before != after or fingerprint != (group.group_epoch, member.state, member.revoking):
            self.dirty = True
        send = request.member_epoch == 0 or before != after
        send |= request.owned is not None and request.owned != _nonempty(member.assigned)
        return HeartbeatResult(
            NONE, None, member.member_id, member.member_epoch, _copy(member.assigned) if send else None
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
            epoch == member.previous_member_epoch and owned is not None and _within(owned, member.assigned)
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
        return changed

    # -- target assignment ------------------------------------------------------------
    def _refresh_target(self, group: ConsumerGroup) -> None:
        """Bump the group epoch when the subscribed topics changed, then compute the
        target assignment if it is older than the group epoch."""
        topics, version = self._current_topics()
        if group.resolved_for == (version, group.group_epoch):
            return  # nothing the subscriptions depend on changed since the last time
        subscriptions = {m.member_id: _subscription(group, m, topics) for m in group.members.values()}
        subscribed = {t: topics[t] for names in subscriptions.values() for t in names}
        if subscribed != group.subscribed:
            group.subscribed = subscribed
            group.group_epoch += 1
        group.resolved_for = (version, group.group_epoch)
        if group.assignment_epoch >= group.group_epoch:
            return
        self.dirty = True
        group.assignor = _group_assignor(group)
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
            if owned is None or _overlaps(owned, member.revoking):
                return  # still revoking
            member.revoking = {}
        elif member.member_epoch == group.assignment_epoch and member.state == STABLE:
            return
        elif member.member_epoch == group.assignment_epoch:  # UNRELEASED: take what was freed
            self._take_free(group, member, target)
            return
        kept = _intersect(member.assigned, target)
        revoke = _minus(member.assigned, target)
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
        member.state = STABLE if _nonempty(member.assigned) == _nonempty(target) else UNRELEASED_PARTITIONS

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
        _forget_unused_regexes(group)
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

    # -- other APIs -----------------------------------------------------------------
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


def check_heartbeat(request: Heartbeat, version: int) -> str | None:
    """Why a heartbeat is an INVALID_REQUEST (Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``
    plus our bounds), or None."""
    if not request.group_id.strip():
        return "GroupId can't be empty."
    if version >= 1 and not request.member_id:
        return "MemberId can't be empty."
    if request.instance_id is not None and not request.instance_id.strip():
        return "InstanceId can't be empty."
    if request.rack_id is not None and not request.rack_id.strip():
        return "RackId can't be empty."
    if request.member_epoch < STATIC_LEAVE_EPOCH:
        return f"MemberEpoch {request.member_epoch} is invalid."
    if request.member_epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
        return "InstanceId can't be null with MemberEpoch -2."
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms < 0:
            return "RebalanceTimeoutMs must be provided in first request."
        if request.owned is None or request.owned:
            return "TopicPartitions must be empty when (re-)joining."
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    if len(request.subscribed_topic_names or ()) > MAX_SUBSCRIBED_TOPICS:
        return f"more than {MAX_SUBSCRIBED_TOPICS} subscribed topics"
    if sum(len(ps) for ps in (request.owned or {}).values()) > MAX_OWNED_PARTITIONS:
        return f"more than {MAX_OWNED_PARTITIONS} owned partitions"
    return None


def _release(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


def _forget_unused_regexes(group: ConsumerGroup) -> None:
    """Drop the resolutions of regexes no member subscribes with any more (as Kafka does
    at once), so a regex subscribed to again is resolved anew, after the heartbeat."""
    used = {m.subscribed_topic_regex for m in group.members.values()}
    group.regex_topics = {r: ts for r, ts in group.regex_topics.items() if r in used}


def _check_choices(request: Heartbeat) -> None:
    """Refuse an assignor we do not have and a regex that does not compile, before the
    heartbeat changes anything."""
    if request.server_assignor is not None and request.server_assignor not in ASSIGNORS:
        raise HeartbeatError(ErrorCode.unsupported_assignor, f"Unknown assignor {request.server_assignor}.")
    if request.subscribed_topic_regex:
        try:
            compile_regex(request.subscribed_topic_regex)
        except InvalidRegexError as exc:
            raise HeartbeatError(ErrorCode.invalid_regular_expression, str(exc)) from exc


def _group_assignor(group: ConsumerGroup) -> str:
    """The assignor most members ask for (ties: by name), else the default."""
    asked = [m.server_assignor for m in group.members.values() if m.server_assignor in ASSIGNORS]
    if not asked:
        return DEFAULT_ASSIGNOR
    return min(set(asked), key=lambda a: (-asked.count(a), str(a))) or DEFAULT_ASSIGNOR


def _subscription(group: ConsumerGroup, member: ConsumerMember, topics: Mapping[str, int]) -> frozenset[str]:
    """The existing topics a member subscribes to: its names, and what its regex matched
    when last resolved (nothing before the first resolution)."""
    matched = group.regex_topics.get(member.subscribed_topic_regex or "", frozenset())
    return frozenset(t for t in member.subscribed_topic_names | matched if t in topics)


def _copy(tps: TopicPartitions) -> TopicPartitions:
    return {t: set(ps) for t, ps in tps.items() if ps}


def _nonempty(tps: TopicPartitions) -> TopicPartitions:
    return {t: ps for t, ps in tps.items() if ps}


def _within(small: TopicPartitions, big: TopicPartitions) -> bool:
    return all(ps <= big.get(t, set()) for t, ps in small.items())


def _overlaps(a: TopicPartitions, b: TopicPartitions) -> bool:
    return any(ps & b.get(t, set()) for t, ps in a.items())


def _intersect(a: TopicPartitions, b: TopicPartitions) -> TopicPartitions:
    return {t: ps & b[t] for t, ps in a.items() if t in b and ps & b[t]}


def _minus(a: TopicPartitions, b: TopicPartitions) -> TopicPartitions:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}
