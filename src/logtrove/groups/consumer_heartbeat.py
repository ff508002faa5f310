"""ConsumerGroupHeartbeat as :mod:`.consumer_protocol` takes it: the request and answer
types, the request's validation (:func:`check_heartbeat`, the broker's INVALID_REQUEST
check) and the checks of its assignor and regex (:func:`check_choices`)."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from logtrove.groups.assignors import ASSIGNORS, InvalidRegexError, compile_regex
from logtrove.groups.consumer_state import TopicPartitions

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
    describable: frozenset[str] | None = None  # topics the member's principal may describe; None: all


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


def check_choices(request: Heartbeat) -> None:
    """Refuse an assignor we do not have and a regex that does not compile, before the
    heartbeat changes anything."""
    if request.server_assignor is not None and request.server_assignor not in ASSIGNORS:
        raise HeartbeatError(ErrorCode.unsupported_assignor, f"Unknown assignor {request.server_assignor}.")
    if request.subscribed_topic_regex:
        try:
            compile_regex(request.subscribed_topic_regex)
        except InvalidRegexError as exc:
            raise HeartbeatError(ErrorCode.invalid_regular_expression, str(exc)) from exc
