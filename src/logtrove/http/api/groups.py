"""Consumer groups: lag per partition and in totals per topic and group (in messages, in
time, and for tag subscriptions exactly), and the groups' tag subscriptions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from logtrove.acl import Operation, ResourceType
from logtrove.groups import OFFSETS_TOPIC, OffsetStore
from logtrove.groups.lag import GroupLag
from logtrove.groups.lag import PartitionLag as LagRow
from logtrove.groups.subscriptions import partition_for, subscription_record
from logtrove.groups.tags import InvalidTagExpressionError
from logtrove.http.api.topics import StorageDep, TopicPath
from logtrove.http.context import HttpContext, get_context
from logtrove.http.groups import GroupsSource
from logtrove.http.models import (
    TOPIC_PATTERN,
    GroupDetail,
    GroupSummary,
    PartitionLag,
    SetTagSubscription,
    TagSubscriptionInfo,
    TopicLag,
)
from logtrove.http.problems import Problem, bad_request, problem_responses
from logtrove.http.security import allowed, require
from logtrove.records import build_batch

router = APIRouter(prefix="/api/v1", tags=["groups"])

GroupPath = Annotated[str, Path(min_length=1, max_length=255, description="Group ID.")]
CtxDep = Annotated[HttpContext, Depends(get_context)]


def source(request: Request) -> GroupsSource:
    """FastAPI dependency: the app's :class:`GroupsSource`."""
    groups: GroupsSource = request.app.state.groups
    return groups


SourceDep = Annotated[GroupsSource, Depends(source)]


def _partition(row: LagRow) -> PartitionLag:
    return PartitionLag(
        topic=row.topic,
        partition=row.partition,
        log_start_offset=row.log_start_offset,
        log_end_offset=row.log_end_offset,
        committed_offset=row.committed_offset,
        commit_timestamp=row.commit_timestamp,
        never_committed=row.never_committed,
        lag=row.lag,
        time_lag_ms=row.time_lag_ms,
        tags=row.tags,
        tag_lag=row.tag_lag,
        tag_time_lag_ms=row.tag_time_lag_ms,
        last_stable_offset=row.last_stable_offset,
    )


def _summary(groups: GroupsSource, lag: GroupLag) -> GroupSummary:
    state = groups.states().get(lag.group)
    return GroupSummary(
        group=lag.group,
        state=state.state if state else "Empty",
        type=state.type if state else None,
        members=state.members if state else None,
        topics=[t.topic for t in lag.topics],
        lag=lag.lag,
        time_lag_ms=lag.time_lag_ms,
        tag_lag=lag.tag_lag,
        never_committed_partitions=lag.never_committed,
    )


def _require_group(groups: GroupsSource, group: str) -> None:
    if group not in groups.group_ids():
        raise Problem(
            404,
            "unknown-group",
            "Unknown group",
            f"no group {group!r} has committed offsets or subscriptions",
        )


@router.get("/groups", summary="Consumer groups with their total lag")
def list_groups(request: Request, groups: SourceDep, storage: StorageDep) -> list[GroupSummary]:
    lags = {lag.group: lag for lag in groups.lags()}
    for live in groups.states():  # live groups that never committed
        lags.setdefault(live, GroupLag(live, ()))
    return [_summary(groups, _visible(request, lags[g])) for g in sorted(lags) if _may_describe(request, g)]


def _may_describe(request: Request, group: str) -> bool:
    return allowed(request, Operation.DESCRIBE, ResourceType.GROUP, group, audited=False)


def _topic_visible(request: Request, topic: str) -> bool:
    return allowed(request, Operation.DESCRIBE, ResourceType.TOPIC, topic, audited=False)


def _visible(request: Request, lag: GroupLag) -> GroupLag:
    """``lag`` without the topics the principal may not describe (as OffsetFetch answers
    only for describable topics)."""
    return GroupLag(lag.group, tuple(t for t in lag.topics if _topic_visible(request, t.topic)))


@router.get(
    "/topics/{topic}/groups",
    summary="The groups consuming a topic, with their lag on it",
    responses=problem_responses(404),
)
def topic_groups(
    request: Request, topic: TopicPath, groups: SourceDep, storage: StorageDep
) -> list[GroupSummary]:
    storage.topic(topic)
    return [_summary(groups, lag) for lag in groups.lags(topic) if _may_describe(request, lag.group)]


@router.get(
    "/groups/{group}",
    summary="A group's lag per topic and partition",
    responses=problem_responses(404, 422),
)
def describe_group(
    request: Request,
    group: GroupPath,
    groups: SourceDep,
    storage: StorageDep,
    topic: Annotated[str | None, Query(pattern=TOPIC_PATTERN, description="Only this topic.")] = None,
) -> GroupDetail:
    _require_group(groups, group)
    if topic is not None:
        require(request, Operation.DESCRIBE, ResourceType.TOPIC, topic)
        storage.topic(topic)  # 404 for an unknown topic
    lag = _visible(request, groups.lag(group, topic))
    state = groups.states().get(group)
    return GroupDetail(
        **_summary(groups, lag).model_dump(),
        topic_lags=[
            TopicLag(
                topic=t.topic,
                tags=t.tags,
                lag=t.lag,
                time_lag_ms=t.time_lag_ms,
                tag_lag=t.tag_lag,
                tag_time_lag_ms=t.tag_time_lag_ms,
                never_committed_partitions=t.never_committed,
            )
            for t in lag.topics
        ],
        partitions=[_partition(row) for row in lag.partitions()],
        subscriptions={
            t: s.expression for t, s in groups.subscriptions(group).items() if _topic_visible(request, t)
        },
        member_list=[dict(m) for m in state.member_list] if state else [],
    )


@router.put(
    "/groups/{group}/subscriptions/{topic}",
    summary="Declare the tags a group consumes on a topic (its tag-aware lag counts those)",
    responses=problem_responses(403, 404, 422, 503),
)
def set_subscription(
    group: GroupPath, topic: TopicPath, body: SetTagSubscription, ctx: CtxDep, groups: SourceDep
) -> TagSubscriptionInfo:
    _write_subscription(ctx, groups, group, topic, body.tags)
    found = groups.subscriptions(group).get(topic)
    if found is None:  # pragma: no cover - the write above is read back through the same storage
        raise Problem(500, "internal", "Internal error", "the subscription was written but is not visible")
    return TagSubscriptionInfo(group=group, topic=topic, tags=found.expression, updated_ms=found.updated_ms)


@router.delete(
    "/groups/{group}/subscriptions/{topic}",
    status_code=204,
    summary="Remove a group's tag subscription on a topic",
    responses=problem_responses(403, 404, 422, 503),
)
def delete_subscription(group: GroupPath, topic: TopicPath, ctx: CtxDep, groups: SourceDep) -> Response:
    if topic not in groups.subscriptions(group):
        raise Problem(
            404,
            "unknown-subscription",
            "Unknown subscription",
            f"group {group!r} has no subscription on {topic!r}",
        )
    _write_subscription(ctx, groups, group, topic, None)
    return Response(status_code=204)


def _write_subscription(
    ctx: HttpContext, groups: GroupsSource, group: str, topic: str, tags: str | None
) -> None:
    """Append the subscription record to ``__consumer_offsets`` (through the broker when
    there is one), then make the next read see it."""
    if not ctx.allow_writes:
        raise Problem(
            403, "read-only", "Read-only", "this server is read-only (start `logtrove serve` to write)"
        )
    storage = ctx.storage
    storage.topic(topic)  # 404 for an unknown topic
    try:
        record = subscription_record(group, topic, tags, ctx.clock.now_ms())
    except InvalidTagExpressionError as exc:
        raise bad_request(str(exc), "invalid-tags") from None
    if not storage.has_topic(OFFSETS_TOPIC):
        OffsetStore(storage).load()  # creates it as the broker would (a broker always has it)
    partition = partition_for(group, storage.topic(OFFSETS_TOPIC).partitions)
    ctx.append(OFFSETS_TOPIC, partition, build_batch([record], clock=ctx.clock))
    groups.invalidate()
