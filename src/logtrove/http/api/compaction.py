"""Compaction status: dirty ratio, last clean and uncleanable reason per partition."""

from __future__ import annotations

from fastapi import APIRouter, Request

from logtrove.acl import Operation, ResourceType
from logtrove.http.api.topics import StorageDep, TopicPath
from logtrove.http.models import PartitionCompaction, TopicCompaction
from logtrove.http.problems import problem_responses
from logtrove.http.security import allowed
from logtrove.storage import Storage, TopicInfo
from logtrove.storage.cleaner import status_of

router = APIRouter(prefix="/api/v1", tags=["compaction"])


def topic_compaction(storage: Storage, info: TopicInfo) -> TopicCompaction:
    parts = []
    if info.config.compact:
        for p in range(info.partitions):
            log = storage.log(info.name, p)
            status = status_of(storage, log)
            parts.append(
                PartitionCompaction(
                    partition=p,
                    first_dirty_offset=status.first_dirty_offset,
                    log_end_offset=log.log_end_offset,
                    dirty_ratio=status.dirty_ratio,
                    min_cleanable_dirty_ratio=info.config.min_cleanable_dirty_ratio,
                    last_clean_ms=status.last_clean_ms,
                    uncleanable_reason=status.uncleanable_reason,
                    last_stats=status.last_stats,
                )
            )
    return TopicCompaction(
        topic=info.name,
        cleanup_policy=info.config.cleanup_policy,
        compacted=info.config.compact,
        partitions=parts,
    )


@router.get("/compaction", summary="Compaction status of every compacted topic")
def all_compaction(request: Request, storage: StorageDep) -> list[TopicCompaction]:
    return [
        topic_compaction(storage, info)
        for info in storage.topics()
        if info.config.compact
        and allowed(request, Operation.DESCRIBE, ResourceType.TOPIC, info.name, audited=False)
    ]


@router.get(
    "/topics/{topic}/compaction",
    summary="Compaction status of one topic",
    responses=problem_responses(404),
)
def compaction(topic: TopicPath, storage: StorageDep) -> TopicCompaction:
    return topic_compaction(storage, storage.topic(topic))
