"""Consumer groups and their lag, per partition and in totals per topic and group."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from logtrove.http.api.topics import StorageDep
from logtrove.http.groups import GroupsSource, LagRow
from logtrove.http.models import TOPIC_PATTERN, GroupDetail, GroupSummary, PartitionLag, TopicLag
from logtrove.http.problems import Problem, problem_responses

router = APIRouter(prefix="/api/v1/groups", tags=["groups"])

GroupPath = Annotated[str, Path(min_length=1, max_length=255, description="Group ID.")]


def source(request: Request) -> GroupsSource:
    groups: GroupsSource = request.app.state.groups
    return groups


def _partition_lag(row: LagRow) -> PartitionLag:
    return PartitionLag(
        topic=row.topic,
        partition=row.partition,
        log_end_offset=row.log_end_offset,
        committed_offset=row.committed.offset if row.committed else None,
        lag=row.lag,
        time_lag_ms=row.time_lag_ms,
        commit_timestamp=row.committed.commit_timestamp if row.committed else None,
    )


def _topic_lags(rows: list[LagRow]) -> list[TopicLag]:
    out = []
    for topic in sorted({r.topic for r in rows}):
        mine = [r for r in rows if r.topic == topic]
        time_lags = [r.time_lag_ms for r in mine if r.time_lag_ms is not None]
        out.append(
            TopicLag(
                topic=topic,
                lag=sum(r.lag or 0 for r in mine),
                time_lag_ms=max(time_lags) if time_lags else None,
                uncommitted_partitions=sum(r.committed is None for r in mine),
            )
        )
    return out


def _summary(groups: GroupsSource, group: str, rows: list[LagRow]) -> GroupSummary:
    state = groups.states().get(group)
    time_lags = [r.time_lag_ms for r in rows if r.time_lag_ms is not None]
    return GroupSummary(
        group=group,
        state=state.state if state else "Empty",
        members=state.members if state else None,
        topics=sorted({r.topic for r in rows}),
        lag=sum(r.lag or 0 for r in rows),
        time_lag_ms=max(time_lags) if time_lags else None,
    )


@router.get("", summary="Consumer groups with their total lag")
def list_groups(request: Request, storage: StorageDep) -> list[GroupSummary]:
    groups = source(request)
    return [_summary(groups, g, groups.lag(g)) for g in groups.group_ids()]


@router.get(
    "/{group}",
    summary="A group's lag per topic and partition",
    responses=problem_responses(404, 422),
)
def describe_group(
    group: GroupPath,
    request: Request,
    storage: StorageDep,
    topic: Annotated[str | None, Query(pattern=TOPIC_PATTERN, description="Only this topic.")] = None,
) -> GroupDetail:
    groups = source(request)
    if group not in groups.group_ids():
        raise Problem(404, "unknown-group", "Unknown group", f"no group {group!r} has committed offsets")
    if topic is not None:
        storage.topic(topic)  # 404 for an unknown topic
    rows = groups.lag(group, topic)
    state = groups.states().get(group)
    return GroupDetail(
        **_summary(groups, group, rows).model_dump(),
        topic_lags=_topic_lags(rows),
        partitions=[_partition_lag(r) for r in rows],
        member_list=[dict(m) for m in state.member_list] if state else [],
    )
