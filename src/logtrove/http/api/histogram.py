"""A topic's records over time: ``GET /api/v1/topics/{topic}/histogram``.

The counts come from the sparse time indexes and batch headers, never from decoding
records (:mod:`logtrove.query.histogram`), so the whole retention of a large topic is
drawn in milliseconds. Without ``from`` / ``to`` the range is the topic's: from its
oldest visible record to its newest, and the buckets then add up to ``messages``.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query

from logtrove.http.api.search import FromParam, Partition, TimeParam
from logtrove.http.api.topics import StorageDep, TopicPath
from logtrove.http.models import HistogramBucket, PartitionHistogram, TopicHistogram
from logtrove.http.problems import problem_responses
from logtrove.http.render import parse_time
from logtrove.query import MAX_BUCKETS, UNITS, histogram, pick_bucket, topic_span
from logtrove.storage import PartitionLog

router = APIRouter(prefix="/api/v1/topics/{topic}", tags=["topics"])

HISTOGRAM_TIME_LIMIT_S = 10.0
"""A histogram costs a lookup per bucket edge and partition; past this it is a 503."""

EXACT = (
    "Counts are differences of ListOffsets-by-time answers (the first record with timestamp "
    "≥ each bucket edge): exact record counts when a partition's timestamps do not go "
    "backwards; offset spans on compacted topics."
)

BucketParam = Annotated[
    str,
    Query(
        max_length=32,
        description=f"Bucket width: auto (the smallest giving at most max_buckets), or one of: {', '.join(UNITS)}.",
    ),
]


@router.get(
    "/histogram",
    summary="Records per time bucket over the topic's retention (from indexes, no record decoding)",
    responses=problem_responses(404, 422, 503),
)
def topic_histogram(
    topic: TopicPath,
    storage: StorageDep,
    from_: FromParam = None,
    to: TimeParam = None,
    bucket: BucketParam = "auto",
    max_buckets: Annotated[int, Query(ge=1, le=MAX_BUCKETS, description="Most buckets.")] = 200,
    partition: Partition = None,
    by_partition: Annotated[bool, Query(description="Also give each partition's counts per bucket.")] = False,
) -> TopicHistogram:
    began = time.monotonic()
    info = storage.topic(topic)
    wanted = range(info.partitions) if partition is None else (partition,)
    logs = [storage.log(topic, p) for p in wanted]
    span = topic_span(logs)
    start = None if from_ is None else parse_time(from_, "from")
    end = None if to is None else parse_time(to, "to")
    if span is None and (start is None or end is None):
        return _empty(topic, logs, began)
    lo, hi = span if span is not None else (0, 1)
    plan = pick_bucket(lo if start is None else start, hi if end is None else end, bucket, max_buckets)
    found = histogram(logs, plan.edges, deadline=began + HISTOGRAM_TIME_LIMIT_S)
    counts = found.counts
    return TopicHistogram(
        topic=topic,
        from_ms=plan.edges[0],
        to_ms=plan.edges[-1],
        bucket=plan.unit,
        bucket_ms=plan.width_ms,
        records=sum(counts),
        buckets=[
            HistogramBucket(start_ms=a, end_ms=b, records=n)
            for a, b, n in zip(plan.edges[:-1], plan.edges[1:], counts, strict=True)
        ],
        partitions=[
            PartitionHistogram(
                partition=p.partition,
                records=p.records,
                size_bytes=p.size_bytes,
                counts=list(p.counts) if by_partition else None,
            )
            for p in found.partitions
        ],
        exact=EXACT,
        edges_walked=found.edges_walked,
        batches_scanned=found.batches_scanned,
        elapsed_ms=round((time.monotonic() - began) * 1000, 3),
    )


def _empty(topic: str, logs: list[PartitionLog], began: float) -> TopicHistogram:
    return TopicHistogram(
        topic=topic,
        from_ms=None,
        to_ms=None,
        bucket="auto",
        bucket_ms=0,
        records=0,
        buckets=[],
        partitions=[
            PartitionHistogram(partition=log.tp.partition, records=0, size_bytes=log.size_bytes)
            for log in logs
        ],
        exact=EXACT,
        edges_walked=0,
        batches_scanned=0,
        elapsed_ms=round((time.monotonic() - began) * 1000, 3),
    )
