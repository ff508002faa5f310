"""A topic's records over time: ``GET /api/v1/topics/{topic}/histogram``.

Each bucket counts the records whose own timestamps fall in it, what a time-range search
of the bucket returns, whatever the order of the timestamps
(:mod:`logtrove.query.histogram`): from the ``.skip`` blocks' counts and time bounds and
from batch headers where they settle it, from record timestamps (never keys or values)
where they do not. Without ``from`` / ``to`` the range is the topic's: from its oldest
visible record to its newest, and the buckets then add up to its data records.
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
"""Past this the histogram stops and answers 503 rather than give counts that are not exact."""

EXACT = (
    "Exact: each bucket counts the data records whose own timestamps fall in it (aborted "
    "transactions' included, transaction markers not), in any order of timestamps; "
    "'decoded' says how many of a bucket's records were counted from record timestamps, "
    "the rest from index summaries and batch headers."
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
            HistogramBucket(start_ms=a, end_ms=b, records=n, decoded=d)
            for a, b, n, d in zip(plan.edges[:-1], plan.edges[1:], counts, found.decoded, strict=True)
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
        blocks_counted=found.blocks_counted,
        batches_counted=found.batches_counted,
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
        blocks_counted=0,
        batches_counted=0,
        batches_scanned=0,
        elapsed_ms=round((time.monotonic() - began) * 1000, 3),
    )
