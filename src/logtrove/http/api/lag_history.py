"""``GET /api/v1/groups/{group}/lag-history``: a group's lag per topic over time, as sampled
by the server into ``lag-history.jsonl`` (:mod:`logtrove.http.lag_history`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from logtrove.acl import Operation, ResourceType
from logtrove.http.api.groups import GroupPath
from logtrove.http.api.search import FromParam
from logtrove.http.lag_history import LagHistory
from logtrove.http.models import GroupLagHistory, LagPoint, TopicLagHistory
from logtrove.http.problems import problem_responses
from logtrove.http.render import parse_time
from logtrove.http.security import allowed

router = APIRouter(prefix="/api/v1/groups", tags=["groups"])


@router.get(
    "/{group}/lag-history",
    summary="A group's lag per topic over time (samples kept by the server)",
    responses=problem_responses(422),
)
def lag_history(
    group: GroupPath,
    request: Request,
    from_: FromParam = None,
    topic: Annotated[str | None, Query(max_length=249, description="Only this topic.")] = None,
) -> GroupLagHistory:
    history: LagHistory = request.app.state.lag_history
    since = 0 if from_ is None else parse_time(from_, "from")
    found = history.points(group, since)
    return GroupLagHistory(
        group=group,
        sampling=request.app.state.lag_sampler is not None,
        topics=[
            TopicLagHistory(
                topic=name,
                points=[LagPoint(t=p.t, lag=p.lag, time_lag_ms=p.time_lag_ms) for p in points],
            )
            for name, points in sorted(found.items())
            if (topic is None or name == topic)
            and allowed(request, Operation.DESCRIBE, ResourceType.TOPIC, name, audited=False)
        ],
    )
