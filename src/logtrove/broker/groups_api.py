"""Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete.

Thin adapters between the kio request bodies of every version and
:class:`logtrove.groups.GroupCoordinator`, which holds the semantics. This broker is
the coordinator of every group and of every transactional ID.

A group ID belongs to one protocol at a time. For a group of the consumer protocol
(KIP-848, :class:`logtrove.groups.ConsumerGroups`), as in Kafka 4.0: JoinGroup is
``INCONSISTENT_GROUP_PROTOCOL`` while it has members (an empty one is taken over);
OffsetCommit and OffsetFetch check the member epoch (``STALE_MEMBER_EPOCH``,
``UNKNOWN_MEMBER_ID``); DescribeGroups answers ``Dead`` (v6: ``GROUP_ID_NOT_FOUND``,
"not a classic group"); ListGroups shows it with group type ``consumer``; DeleteGroups
and OffsetDelete apply the same rules as to a classic consumer group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import CLUSTER_NAME, Operation
from logtrove.broker.access import Check, names_of, per_resource
from logtrove.broker.authorize import OMITTED, Resource, authorized_operations
from logtrove.broker.context import serves
from logtrove.groups import CommittedOffset
from logtrove.wire import ApiKey, ms

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request

CLASSIC, CONSUMER = "classic", "consumer"  # ListGroups v5 group types
DEAD = "Dead"
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _coordinator(broker: BrokerContext, request: Request, key: str, key_type: int) -> dict[str, Any]:
    """The coordinator of one key: this broker (at the endpoint of the listener the client
    came through) for groups and transactional IDs; an unknown key type is INVALID_REQUEST."""
    if key_type in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        host, port = broker.endpoint(request.session.listener)
        return {"key": key, "node_id": broker.node_id, "host": host, "port": port}
    message = f"unknown coordinator key type {key_type}"
    return {
        "key": key,
        "error_code": ErrorCode.invalid_request,
        "error_message": message,
        "node_id": -1,
        "host": "",
        "port": -1,
    }


_READ_GROUP = per_resource(Check(Resource.GROUP, Operation.READ, names_of("group_id")))


@serves(
    ApiKey.FIND_COORDINATOR,
    0,
    6,
    access=per_resource(  # by key type: a group, or a transactional ID
        Check(Resource.GROUP, Operation.DESCRIBE), Check(Resource.TRANSACTIONAL_ID, Operation.DESCRIBE)
    ),
)
async def handle_find_coordinator(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    key_type = getattr(body, "key_type", GROUP_KEY_TYPE)

    def answer(key: str) -> dict[str, Any]:
        if key_type == GROUP_KEY_TYPE and _denied(broker, request, key, Operation.DESCRIBE):
            return {"key": key, "error_code": _GROUP_DENIED, "node_id": -1, "host": "", "port": -1}
        if key_type == TRANSACTION_KEY_TYPE and not broker.allowed(
            request, Operation.DESCRIBE, Resource.TRANSACTIONAL_ID, key
        ):
            code = ErrorCode.transactional_id_authorization_failed
            return {"key": key, "error_code": code, "node_id": -1, "host": "", "port": -1}
        return _coordinator(broker, request, key, key_type)

    if request.version >= 4:
        return {"coordinators": [answer(k) for k in body.coordinator_keys]}
    return answer(body.key)


_GROUP_DENIED = ErrorCode.group_authorization_failed


def _denied(broker: BrokerContext, request: Request, group_id: str, op: Operation = Operation.READ) -> bool:
    """Whether the principal lacks ``op`` on the group (READ: join, sync, heartbeat,
    leave, commit; DESCRIBE: find, describe, fetch offsets; DELETE: delete)."""
    return not broker.allowed(request, op, Resource.GROUP, group_id)


def _unreadable_topics(
    broker: BrokerContext, request: Request, names: Any, op: Operation = Operation.READ
) -> set[str]:
    return {n for n in names if not broker.allowed(request, op, Resource.TOPIC, n)}


@serves(ApiKey.JOIN_GROUP, 0, 9, access=_READ_GROUP)
async def handle_join_group(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    if _denied(broker, request, body.group_id):
        return {"error_code": _GROUP_DENIED, "generation_id": -1, "member_id": body.member_id}
    if broker.consumer_groups.has_members(body.group_id):
        return {
            "error_code": ErrorCode.inconsistent_group_protocol,
            "generation_id": -1,
            "protocol_name": "" if request.version < 7 else None,
            "leader": "",
            "member_id": body.member_id,
            "members": [],
        }
    broker.consumer_groups.drop_empty(body.group_id)
    session = ms(body.session_timeout)
    result = await broker.groups.join(
        body.group_id,
        body.member_id,
        client_id=request.client_id or "",
        client_host="/127.0.0.1",
        session_timeout_ms=session,
        rebalance_timeout_ms=ms(body.rebalance_timeout) if request.version >= 1 else session,
        protocol_type=body.protocol_type,
        protocols=[(p.name, p.metadata) for p in body.protocols],
        group_instance_id=getattr(body, "group_instance_id", None),
        require_known_member_id=request.version >= 4,
    )
    if request.version < 7:
        result = {**result, "protocol_name": result.get("protocol_name") or ""}
    return result


@serves(ApiKey.SYNC_GROUP, 0, 5, access=_READ_GROUP)
async def handle_sync_group(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    if _denied(broker, request, body.group_id):
        return {"error_code": _GROUP_DENIED}
    assignments = {a.member_id: a.assignment for a in body.assignments}
    return await broker.groups.sync(
        body.group_id,
        body.member_id,
        body.generation_id,
        assignments,
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=getattr(body, "protocol_type", None),
        protocol_name=getattr(body, "protocol_name", None),
    )


@serves(ApiKey.HEARTBEAT, 0, 4, access=_READ_GROUP)
async def handle_heartbeat(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    if _denied(broker, request, body.group_id):
        return {"error_code": _GROUP_DENIED}
    instance = getattr(body, "group_instance_id", None)
    return {
        "error_code": broker.groups.heartbeat(body.group_id, body.member_id, body.generation_id, instance)
    }


@serves(ApiKey.LEAVE_GROUP, 0, 5, access=_READ_GROUP)
async def handle_leave_group(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    if _denied(broker, request, body.group_id):
        return {"error_code": _GROUP_DENIED, "members": []}
    if request.version < 3:
        return {"error_code": broker.groups.leave(body.group_id, body.member_id)}
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "error_code": broker.groups.leave(body.group_id, m.member_id, m.group_instance_id),
        }
        for m in body.members
    ]
    return {"members": members}


@serves(
    ApiKey.OFFSET_COMMIT,
    2,
    9,
    access=per_resource(
        Check(Resource.GROUP, Operation.READ, names_of("group_id")),
        Check(Resource.TOPIC, Operation.READ, names_of("topics", "name")),
    ),
)
async def handle_offset_commit(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    now = broker.storage.clock.now_ms()
    commits: dict[tuple[str, int], CommittedOffset] = {}
    unknown: set[tuple[str, int]] = set()
    group_denied = _denied(broker, request, body.group_id)
    denied = set() if group_denied else _unreadable_topics(broker, request, {t.name for t in body.topics})
    for topic in body.topics:
        for p in topic.partitions:
            if group_denied or topic.name in denied:
                continue
            if (
                not broker.storage.has_topic(topic.name)
                or p.partition_index >= broker.storage.topic(topic.name).partitions
            ):
                unknown.add((topic.name, p.partition_index))
                continue
            commits[(topic.name, p.partition_index)] = CommittedOffset(
                p.committed_offset,
                getattr(p, "committed_leader_epoch", -1),
                p.committed_metadata or "",
                now,
            )
    generation = getattr(body, "generation_id_or_member_epoch", getattr(body, "generation_id", -1))
    instance = getattr(body, "group_instance_id", None)
    if group_denied:
        code = _GROUP_DENIED
    elif body.group_id in broker.consumer_groups.groups:
        code = broker.consumer_groups.validate_commit(
            body.group_id, body.member_id, generation, request.version
        )
        if code == ErrorCode.none:
            broker.consumer_groups.commit(body.group_id, commits)
    else:
        code = broker.groups.commit_offsets(body.group_id, body.member_id, generation, commits, instance)
    return {
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": _GROUP_DENIED
                        if group_denied
                        else ErrorCode.topic_authorization_failed
                        if topic.name in denied
                        else ErrorCode.unknown_topic_or_partition
                        if (topic.name, p.partition_index) in unknown
                        else code,
                    }
                    for p in topic.partitions
                ],
            }
            for topic in body.topics
        ]
    }


def _fetch_group(
    broker: BrokerContext, request: Request, group_id: str, topics: Any, require_stable: bool = False
) -> list[dict[str, Any]]:
    """Committed offsets of a group; a topic the principal may not describe is left out of
    an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (Kafka's rules).
    With ``require_stable`` (v7+, read_committed consumers) a partition whose offset an open
    transaction holds is UNSTABLE_OFFSET_COMMIT (retriable)."""
    if topics is None:
        wanted: dict[str, list[int]] = {}
        for t, p in sorted(broker.groups.offsets.for_group(group_id)):
            wanted.setdefault(t, []).append(p)
        hidden = _unreadable_topics(broker, request, wanted, Operation.DESCRIBE)
        wanted = {t: ps for t, ps in wanted.items() if t not in hidden}
        denied: set[str] = set()
    else:
        wanted = {t.name: list(t.partition_indexes) for t in topics}
        denied = _unreadable_topics(broker, request, wanted, Operation.DESCRIBE)
    out = []
    for name, partitions in wanted.items():
        rows: list[dict[str, Any]] = []
        if name in denied:
            rows = [
                {
                    "partition_index": p,
                    "committed_offset": -1,
                    "error_code": ErrorCode.topic_authorization_failed,
                }
                for p in partitions
            ]
            out.append({"name": name, "partitions": rows})
            continue
        for p in partitions:
            c = broker.groups.committed(group_id, name, p)
            if require_stable and broker.txn.has_pending_offsets(group_id, name, p):
                rows.append(
                    {
                        "partition_index": p,
                        "committed_offset": -1,
                        "error_code": ErrorCode.unstable_offset_commit,
                    }
                )
                continue
            rows.append(
                {
                    "partition_index": p,
                    "committed_offset": c.offset if c else -1,
                    "committed_leader_epoch": c.leader_epoch if c else -1,
                    "metadata": c.metadata if c else "",
                }
            )
        out.append({"name": name, "partitions": rows})
    return out


def _fetch_error(broker: BrokerContext, group: Any) -> ErrorCode:
    """OffsetFetch v9+ names the member reading: a consumer-protocol group checks it."""
    if group.group_id not in broker.consumer_groups.groups:
        return ErrorCode.none
    member_id = getattr(group, "member_id", None)
    epoch = getattr(group, "member_epoch", -1)
    return broker.consumer_groups.validate_fetch(group.group_id, member_id, epoch)


@serves(
    ApiKey.OFFSET_FETCH,
    1,
    9,
    access=per_resource(
        Check(Resource.GROUP, Operation.DESCRIBE, names_of("group_id")),
        Check(Resource.GROUP, Operation.DESCRIBE, names_of("groups", "group_id")),
        Check(Resource.TOPIC, Operation.DESCRIBE),  # named topics refused, the rest filtered out
    ),
)
async def handle_offset_fetch(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    stable = bool(getattr(body, "require_stable", False))
    if request.version >= 8:
        groups = []
        for g in body.groups:
            if _denied(broker, request, g.group_id, Operation.DESCRIBE):
                groups.append({"group_id": g.group_id, "error_code": _GROUP_DENIED, "topics": []})
                continue
            error = _fetch_error(broker, g)
            topics = _fetch_group(broker, request, g.group_id, g.topics, stable) if not error else []
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return {"groups": groups}
    if _denied(broker, request, body.group_id, Operation.DESCRIBE):
        # v0-1 have no top-level error code: each partition asked carries it (Kafka)
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p, "committed_offset": -1, "error_code": _GROUP_DENIED}
                    for p in t.partition_indexes
                ],
            }
            for t in body.topics or ()
        ]
        return {"error_code": _GROUP_DENIED, "topics": topics}
    return {"topics": _fetch_group(broker, request, body.group_id, body.topics, stable)}


def _describe_not_classic(group_id: str, version: int) -> dict[str, Any]:
    """DescribeGroups of a consumer-protocol group, as Kafka 4.0 answers: ``Dead`` with no
    members; from v6 (which has an error message) ``GROUP_ID_NOT_FOUND`` too."""
    described: dict[str, Any] = {"error_code": ErrorCode.none, "group_id": group_id, "group_state": DEAD}
    if version >= 6:
        described["error_code"] = ErrorCode.group_id_not_found
        described["error_message"] = f"Group {group_id} is not a classic group."
    return {**described, "protocol_type": "", "protocol_data": "", "members": []}


def _describe(broker: BrokerContext, group_id: str, version: int) -> dict[str, Any]:
    """DescribeGroups of one group; from v6 an unknown group is ``GROUP_ID_NOT_FOUND``
    ("not found"), where earlier versions answer ``Dead`` without error (Kafka 4.0)."""
    if group_id in broker.consumer_groups.groups:
        return _describe_not_classic(group_id, version)
    described = broker.groups.describe(group_id)
    if version >= 6 and described["group_state"] == DEAD:
        described["error_code"] = ErrorCode.group_id_not_found
        described["error_message"] = f"Group {group_id} not found."
    return described


@serves(
    ApiKey.DESCRIBE_GROUPS,
    0,
    6,
    access=per_resource(Check(Resource.GROUP, Operation.DESCRIBE, names_of("groups"))),
)
async def handle_describe_groups(broker: BrokerContext, request: Request) -> Reply:
    asked = bool(getattr(request.body, "include_authorized_operations", False))
    groups = [
        {
            **_describe(broker, g, request.version),
            "authorized_operations": authorized_operations(broker, request, Resource.GROUP, g, asked),
        }
        if not _denied(broker, request, g, Operation.DESCRIBE)
        else {"error_code": _GROUP_DENIED, "group_id": g, "authorized_operations": OMITTED}
        for g in request.body.groups
    ]
    return {"groups": groups}


def _all_groups(broker: BrokerContext) -> list[dict[str, Any]]:
    """Every group of both protocols, with ListGroups v5's ``group_type``."""
    consumer = broker.consumer_groups.groups
    groups = [
        {**g, "group_type": CLASSIC} for g in broker.groups.list_groups() if g["group_id"] not in consumer
    ]
    groups += [
        {"group_id": g.group_id, "protocol_type": "consumer", "group_state": g.state, "group_type": CONSUMER}
        for g in consumer.values()
    ]
    return sorted(groups, key=lambda g: str(g["group_id"]))


@serves(
    ApiKey.LIST_GROUPS,
    0,
    5,
    access=per_resource(  # DESCRIBE on the cluster lists every group, else those it may describe
        Check(Resource.CLUSTER, Operation.DESCRIBE, listing=True),
        Check(Resource.GROUP, Operation.DESCRIBE, listing=True),
    ),
)
async def handle_list_groups(broker: BrokerContext, request: Request) -> Reply:
    """ListGroups; the states (v4+) and types (v5+) filters are case-insensitive, as in Kafka.
    A principal without DESCRIBE on the cluster sees only the groups it may describe."""
    states = {s.lower() for s in getattr(request.body, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(request.body, "types_filter", ()) or ()}
    groups = [
        g
        for g in _all_groups(broker)
        if (not states or g["group_state"].lower() in states) and (not types or g["group_type"] in types)
    ]
    if not broker.allowed(request, Operation.DESCRIBE, Resource.CLUSTER, CLUSTER_NAME, audited=False):
        groups = [  # only the groups it may describe
            g
            for g in groups
            if broker.allowed(request, Operation.DESCRIBE, Resource.GROUP, g["group_id"], audited=False)
        ]
    return {"groups": groups}


@serves(
    ApiKey.DELETE_GROUPS,
    0,
    2,
    access=per_resource(Check(Resource.GROUP, Operation.DELETE, names_of("groups_names"))),
)
async def handle_delete_groups(broker: BrokerContext, request: Request) -> Reply:
    results = [
        {
            "group_id": g,
            "error_code": _GROUP_DENIED
            if _denied(broker, request, g, Operation.DELETE)
            else broker.consumer_groups.delete_group(g)
            if g in broker.consumer_groups.groups
            else broker.groups.delete_group(g),
        }
        for g in request.body.groups_names
    ]
    return {"results": results}


@serves(
    ApiKey.OFFSET_DELETE,
    0,
    0,
    access=per_resource(
        Check(Resource.GROUP, Operation.DELETE, names_of("group_id")),
        Check(Resource.TOPIC, Operation.READ, names_of("topics", "name")),
    ),
)
async def handle_offset_delete(broker: BrokerContext, request: Request) -> Reply:
    """OffsetDelete: a partition of an unknown topic is UNKNOWN_TOPIC_OR_PARTITION (as
    Kafka answers from its metadata); the others go to the coordinator's rules."""
    body = request.body
    if _denied(broker, request, body.group_id, Operation.DELETE):
        return {"error_code": _GROUP_DENIED, "topics": []}
    unreadable = _unreadable_topics(broker, request, {t.name for t in body.topics})
    known = {t.name: t.partitions for t in broker.storage.topics() if t.name not in unreadable}
    asked = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    existing = [(t, p) for t, p in asked if 0 <= p < known.get(t, 0)]
    if body.group_id in broker.consumer_groups.groups:
        group_error, errors = ErrorCode.none, broker.consumer_groups.delete_offsets(body.group_id, existing)
    else:
        group_error, errors = broker.groups.delete_offsets(body.group_id, existing)
    if group_error:
        return {"error_code": group_error, "topics": []}
    topics: dict[str, list[dict[str, Any]]] = {}
    for t, p in asked:
        missing = (
            ErrorCode.topic_authorization_failed if t in unreadable else ErrorCode.unknown_topic_or_partition
        )
        code = errors.get((t, p), missing)
        topics.setdefault(t, []).append({"partition_index": p, "error_code": code})
    return {
        "error_code": ErrorCode.none,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
