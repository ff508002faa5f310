"""Topics and partitions: list, describe, create, configs; offsets, sizes and segments."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from logtrove.acl import CLUSTER_NAME, Operation, ResourceType
from logtrove.http.context import HttpContext, get_context, get_storage
from logtrove.http.models import (
    TOPIC_PATTERN,
    AlterConfigs,
    ConfigEntry,
    CreateTopic,
    PartitionDetail,
    PartitionSummary,
    SegmentInfo,
    TopicDetail,
    TopicSummary,
)
from logtrove.http.problems import Problem, problem_responses
from logtrove.http.security import allowed, require
from logtrove.storage import CONFIG_DEFS, PartitionLog, Storage, TopicInfo, recorded_index_offsets

router = APIRouter(prefix="/api/v1/topics", tags=["topics"])

TopicPath = Annotated[str, Path(pattern=TOPIC_PATTERN, description="Topic name.")]
PartitionPath = Annotated[int, Path(ge=0, le=9_999, description="Partition number.")]
StorageDep = Annotated[Storage, Depends(get_storage)]


def partition_summary(log: PartitionLog, indexed_offset: int | None) -> PartitionSummary:
    start, end = log.log_start_offset, log.log_end_offset
    segments = log.segments
    max_ts = max((s.max_timestamp for s in segments), default=-1)
    return PartitionSummary(
        partition=log.tp.partition,
        log_start_offset=start,
        log_end_offset=end,
        messages=max(end - start, 0),
        size_bytes=sum(s.size for s in segments),
        segments=len(segments),
        max_timestamp=max_ts if max_ts >= 0 else None,
        indexed_offset=indexed_offset,
    )


def _partitions(storage: Storage, info: TopicInfo) -> list[PartitionSummary]:
    indexed = recorded_index_offsets(storage.path)
    return [
        partition_summary(storage.log(info.name, p), indexed.get((info.name, p)))
        for p in range(info.partitions)
    ]


def config_entries(info: TopicInfo) -> list[ConfigEntry]:
    values = info.config.as_strings()
    return [
        ConfigEntry(
            name=d.name,
            value=values[d.name],
            default=d.default,
            source="topic" if d.name in info.overrides else "default",
            doc=d.doc,
        )
        for d in CONFIG_DEFS
    ]


def topic_detail(storage: Storage, info: TopicInfo) -> TopicDetail:
    parts = _partitions(storage, info)
    return TopicDetail(
        cluster_id=storage.data_dir.cluster_id,
        name=info.name,
        topic_id=str(info.topic_id),
        partitions=info.partitions,
        internal=info.internal,
        created_ms=info.created_ms,
        cleanup_policy=info.config.cleanup_policy,
        retention_ms=info.config.retention_ms,
        retention_bytes=info.config.retention_bytes,
        messages=sum(p.messages for p in parts),
        size_bytes=sum(p.size_bytes for p in parts),
        overrides=dict(info.overrides),
        configs=config_entries(info),
        partition_list=parts,
    )


def _require_writes(ctx: HttpContext) -> None:
    if not ctx.allow_writes:
        raise Problem(
            403, "read-only", "Read-only", "this server is read-only (start `logtrove serve` to write)"
        )


@router.get("", summary="List topics")
def list_topics(
    request: Request,
    storage: StorageDep,
    internal: Annotated[bool, Query(description="Include internal topics (`__…`).")] = False,
) -> list[TopicSummary]:
    out = []
    for info in storage.topics():
        if info.internal and not internal:
            continue
        if not allowed(request, Operation.DESCRIBE, ResourceType.TOPIC, info.name, audited=False):
            continue
        parts = _partitions(storage, info)
        out.append(
            TopicSummary(
                name=info.name,
                partitions=info.partitions,
                internal=info.internal,
                cleanup_policy=info.config.cleanup_policy,
                messages=sum(p.messages for p in parts),
                size_bytes=sum(p.size_bytes for p in parts),
            )
        )
    return out


@router.post(
    "",
    status_code=201,
    summary="Create a topic",
    responses=problem_responses(403, 409, 422),
)
def create_topic(
    request: Request,
    body: CreateTopic,
    response: Response,
    ctx: Annotated[HttpContext, Depends(get_context)],
) -> TopicDetail:
    _require_writes(ctx)
    if not allowed(request, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, audited=False):
        require(request, Operation.CREATE, ResourceType.TOPIC, body.name)  # as Kafka's CreateTopics
    info = ctx.storage.create_topic(body.name, body.partitions, body.configs)
    response.headers["Location"] = f"/api/v1/topics/{info.name}"
    return topic_detail(ctx.storage, info)


@router.get("/{topic}", summary="Describe a topic", responses=problem_responses(404))
def describe_topic(topic: TopicPath, storage: StorageDep) -> TopicDetail:
    return topic_detail(storage, storage.topic(topic))


@router.get("/{topic}/configs", summary="A topic's effective configs", responses=problem_responses(404))
def topic_configs(topic: TopicPath, storage: StorageDep) -> list[ConfigEntry]:
    return config_entries(storage.topic(topic))


@router.patch(
    "/{topic}/configs",
    summary="Set or remove config overrides",
    responses=problem_responses(403, 404, 422),
)
def alter_configs(
    topic: TopicPath, body: AlterConfigs, ctx: Annotated[HttpContext, Depends(get_context)]
) -> list[ConfigEntry]:
    _require_writes(ctx)
    info = ctx.storage.alter_topic_configs(topic, body.set, body.delete)
    return config_entries(info)


@router.get(
    "/{topic}/partitions", summary="Offsets and sizes of every partition", responses=problem_responses(404)
)
def list_partitions(topic: TopicPath, storage: StorageDep) -> list[PartitionSummary]:
    return _partitions(storage, storage.topic(topic))


@router.get(
    "/{topic}/partitions/{partition}",
    summary="One partition with its segments",
    responses=problem_responses(404),
)
def describe_partition(topic: TopicPath, partition: PartitionPath, storage: StorageDep) -> PartitionDetail:
    log = storage.log(topic, partition)
    segments = log.segments
    summary = partition_summary(log, recorded_index_offsets(storage.path).get((topic, partition)))
    return PartitionDetail(
        **summary.model_dump(),
        topic=topic,
        segments_detail=[
            SegmentInfo(
                base_offset=s.base_offset,
                next_offset=s.next_offset,
                size_bytes=s.size,
                max_timestamp=s.max_timestamp if s.max_timestamp >= 0 else None,
                file=s.log_path.name,
                active=i == len(segments) - 1,
            )
            for i, s in enumerate(segments)
        ],
    )
