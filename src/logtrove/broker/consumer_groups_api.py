"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): the consumer group
protocol of KIP-848.

Thin adapters between kio's bodies and :class:`logtrove.groups.ConsumerGroups`: topics
travel as topic IDs on the wire and as names inside, so this module maps them (an owned
partition of an unknown topic ID is dropped: that topic is gone). A group ID belongs to
one protocol at a time, as in Kafka: a heartbeat for a classic group with members is
``GROUP_ID_NOT_FOUND``; an empty classic group is taken over (its commits stay).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import Operation
from logtrove.broker.access import Check, names_of, per_resource
from logtrove.broker.authorize import OMITTED, Resource, authorized_operations
from logtrove.broker.context import serves
from logtrove.groups import Heartbeat
from logtrove.groups.consumer_protocol import check_heartbeat
from logtrove.groups.group_configs import HEARTBEAT_INTERVAL
from logtrove.wire import ApiKey, ms

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request

CLIENT_HOST = "/127.0.0.1"
MAX_OWNED_TOPICS = 10_000
CONSUMER_MEMBER_TYPE = 1  # ConsumerGroupDescribe v1 member_type: 0 classic, 1 consumer


def _names_by_id(broker: BrokerContext) -> dict[uuid.UUID, str]:
    return {info.topic_id: info.name for info in broker.storage.topics()}


def _ids_by_name(broker: BrokerContext) -> dict[str, uuid.UUID]:
    return {info.name: info.topic_id for info in broker.storage.topics()}


def _owned(broker: BrokerContext, topic_partitions: Any) -> dict[str, set[int]] | None:
    if topic_partitions is None:
        return None
    names = _names_by_id(broker)
    owned: dict[str, set[int]] = {}
    for tp in topic_partitions:
        name = names.get(tp.topic_id)
        if name is not None:
            owned.setdefault(name, set()).update(tp.partitions)
    return owned


def _topic_partitions(broker: BrokerContext, assignment: dict[str, set[int]]) -> list[dict[str, Any]]:
    ids = _ids_by_name(broker)
    return [
        {"topic_id": ids[t], "partitions": sorted(ps)}
        for t, ps in sorted(assignment.items())
        if t in ids and ps
    ]


def _error(code: ErrorCode, message: str, body: Any) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "member_id": body.member_id,
        "member_epoch": body.member_epoch,
        "heartbeat_interval": 0,
    }


@serves(
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    0,
    1,
    access=per_resource(
        Check(Resource.GROUP, Operation.READ, names_of("group_id")),
        Check(Resource.TOPIC, Operation.DESCRIBE),  # subscribed names refused; a regex's matches filtered
    ),
)
async def handle_consumer_group_heartbeat(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    if not broker.allowed(request, Operation.READ, Resource.GROUP, body.group_id):
        return _error(
            ErrorCode.group_authorization_failed, f"READ on group {body.group_id!r} is needed", body
        )
    if len(body.topic_partitions or ()) > MAX_OWNED_TOPICS:  # before the ID mapping walks them
        return _error(ErrorCode.invalid_request, "too many owned topics", body)
    denied = _undescribable(broker, request, body.subscribed_topic_names)
    if denied:  # Kafka (KAFKA-18813): named topics need DESCRIBE; the heartbeat goes no further
        shown = ", ".join(denied[:10]) + (f" and {len(denied) - 10} more" if len(denied) > 10 else "")
        return _error(ErrorCode.topic_authorization_failed, f"DESCRIBE is needed on topics: {shown}", body)
    if body.member_epoch == 0 and body.topic_partitions:  # even of topic IDs we do not know
        return _error(ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining.", body)
    heartbeat = Heartbeat(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=ms(body.rebalance_timeout),
        subscribed_topic_names=body.subscribed_topic_names,
        subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),
        server_assignor=body.server_assignor,
        owned=_owned(broker, body.topic_partitions),
        client_id=request.client_id or "",
        client_host=CLIENT_HOST,
        describable=_describable(broker, request),
    )
    invalid = check_heartbeat(heartbeat, request.version)
    if invalid is not None:
        return _error(ErrorCode.invalid_request, invalid, body)
    if heartbeat.member_id == "" and heartbeat.member_epoch == 0:  # v0: the coordinator names members
        heartbeat = dataclasses.replace(heartbeat, member_id=str(uuid.uuid4()))
    if broker.groups.has_live_group(heartbeat.group_id):
        return _error(
            ErrorCode.group_id_not_found, f"Group {heartbeat.group_id} is not a consumer group.", body
        )
    broker.groups.drop_empty(heartbeat.group_id)
    result = broker.consumer_groups.heartbeat(heartbeat)
    if heartbeat.member_epoch < 0 and not result.error:  # a leave: answered once it is saved
        await broker.consumer_groups.saved()
    return {
        "error_code": result.error,
        "error_message": result.message,
        "member_id": result.member_id or heartbeat.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval": broker.group_configs.value(heartbeat.group_id, HEARTBEAT_INTERVAL)
        if not result.error
        else 0,
        "assignment": None
        if result.assignment is None
        else {"topic_partitions": _topic_partitions(broker, result.assignment)},
    }


def _describable(broker: BrokerContext, request: Request) -> frozenset[str] | None:
    """The topics the principal may describe, which are all a regex of its may match
    (``None`` without an authorizer: every topic)."""
    if broker.authorizer is None:
        return None
    return frozenset(
        t.name
        for t in broker.storage.topics()
        if broker.allowed(request, Operation.DESCRIBE, Resource.TOPIC, t.name, audited=False)
    )


def _undescribable(broker: BrokerContext, request: Request, names: list[str] | None) -> list[str]:
    """The subscribed topic names the principal may not DESCRIBE, sorted (none without an
    authorizer). A member may not learn of, or be assigned, a topic it cannot see."""
    if not names or broker.authorizer is None:
        return []
    return sorted({n for n in names if not broker.allowed(request, Operation.DESCRIBE, Resource.TOPIC, n)})


def _assignment(ids: dict[str, uuid.UUID], tps: dict[str, set[int]]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": ids[t], "topic_name": t, "partitions": sorted(ps)}
            for t, ps in sorted(tps.items())
            if t in ids and ps
        ]
    }


def _describe(broker: BrokerContext, group_id: str, ops: int) -> dict[str, Any]:
    group = broker.consumer_groups.current(group_id)
    if group is None:
        live = broker.groups.has_live_group(group_id) or group_id in broker.offsets.groups()
        message = f"Group {group_id} is not a consumer group." if live else f"Group {group_id} not found."
        return {
            "error_code": ErrorCode.group_id_not_found,
            "error_message": message,
            "group_id": group_id,
            "group_state": "Dead",
            "group_epoch": -1,
            "assignment_epoch": -1,
            "assignor_name": "",
            "members": [],
            "authorized_operations": ops,
        }
    ids = _ids_by_name(broker)
    members = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": sorted(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": _assignment(ids, m.assigned),
            "target_assignment": _assignment(ids, group.target.get(m.member_id, {})),
            "member_type": CONSUMER_MEMBER_TYPE,
        }
        for m in group.members.values()
    ]
    return {
        "error_code": ErrorCode.none,
        "group_id": group_id,
        "group_state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor,
        "members": members,
        "authorized_operations": ops,
    }


@serves(
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    0,
    1,
    access=per_resource(Check(Resource.GROUP, Operation.DESCRIBE, names_of("group_ids"))),
)
async def handle_consumer_group_describe(broker: BrokerContext, request: Request) -> Reply:
    """ConsumerGroupDescribe; a classic group is ``GROUP_ID_NOT_FOUND`` ("not a consumer
    group"), as in Kafka."""
    asked = request.body.include_authorized_operations
    return {
        "groups": [
            _describe(broker, g, authorized_operations(broker, request, Resource.GROUP, g, asked))
            if broker.allowed(request, Operation.DESCRIBE, Resource.GROUP, g)
            else {
                "group_id": g,
                "error_code": ErrorCode.group_authorization_failed,
                "authorized_operations": OMITTED,
            }
            for g in request.body.group_ids
        ]
    }
