"""Request and response bodies of the API (pydantic models; they make the OpenAPI schema).

Names follow the CLI's ``--json`` output: offsets and times are integers (epoch
milliseconds), keys and values are UTF-8 text, or base64 in ``key_b64`` / ``value_b64``
when they are not valid UTF-8 (exactly one of the pair is set unless the field is null).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TOPIC_PATTERN = r"^[a-zA-Z0-9._-]{1,249}$"
TopicName = Annotated[str, Field(pattern=TOPIC_PATTERN, description="Topic name.")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- health ---------------------------------------------------------------------------
class Health(_Model):
    status: Literal["ok"]
    version: str
    data_dir: str
    read_only: bool = Field(description="True when the API cannot write (produce, create topics).")
    topics: int
    uptime_ms: int
    features: dict[str, bool] = Field(
        description="Optional parts present: query, groups, lag; auth: requests need a credential."
    )


# -- topics ----------------------------------------------------------------------------
class PartitionSummary(_Model):
    partition: int
    log_start_offset: int
    log_end_offset: int
    messages: int = Field(description="log end - log start (an upper bound on compacted topics).")
    size_bytes: int
    segments: int
    max_timestamp: int | None = Field(description="Largest record timestamp, null when empty.")
    indexed_offset: int | None = Field(
        description="Offset below which every record is in the key, tag and content indexes (the "
        "indexer's checkpoint, rewritten about once a second); null when no indexer has recorded "
        "this partition. Queries scan what is not indexed, so answers are complete either way."
    )


class SegmentInfo(_Model):
    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp: int | None
    file: str
    active: bool


class PartitionDetail(PartitionSummary):
    topic: str
    segments_detail: list[SegmentInfo]


class TopicSummary(_Model):
    name: str
    partitions: int
    internal: bool
    cleanup_policy: str
    messages: int
    size_bytes: int


class ConfigEntry(_Model):
    name: str
    value: str
    default: str
    source: Literal["default", "topic"]
    doc: str


class TopicDetail(_Model):
    cluster_id: str = Field(description="The data directory's cluster ID (the broker's).")
    name: str
    topic_id: str
    partitions: int
    internal: bool
    created_ms: int
    cleanup_policy: str
    retention_ms: int
    retention_bytes: int
    messages: int
    size_bytes: int
    overrides: dict[str, str]
    configs: list[ConfigEntry]
    partition_list: list[PartitionSummary]


class CreateTopic(_Model):
    name: TopicName
    partitions: int = Field(
        default=1, ge=1, le=1000, description="At most 1000 over HTTP (the CLI allows more)."
    )
    configs: dict[str, str] = Field(default_factory=dict, description="Topic config overrides.")


class AlterConfigs(_Model):
    set: dict[str, str] = Field(default_factory=dict, description="Overrides to set.")
    delete: list[str] = Field(default_factory=list, description="Overrides to remove (back to default).")


# -- messages ---------------------------------------------------------------------------
class Header(_Model):
    name: str
    value: str | None = None
    value_b64: str | None = None


class Message(_Model):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str | None = None
    key_b64: str | None = None
    value: str | None = None
    value_b64: str | None = None
    headers: list[Header] = Field(default_factory=list)
    id: str | None = Field(default=None, description="Broker position ID: decodes straight to this record.")
    client_id: str | None = Field(default=None, description="The client's message ID header, if any.")


class ScanStats(BaseModel):
    """What a query read (see ``logtrove.query.Stats``)."""

    model_config = ConfigDict(extra="allow")

    bytes_scanned: int = 0
    records_scanned: int = 0
    batches_prefiltered: int = 0
    segments_scanned: int = 0
    segments_skipped: int = 0
    blocks_skipped: int = 0
    index_candidates: int = 0
    index_false_hits: int = 0


class MessagePage(_Model):
    """One page of results; pass ``next_cursor`` as ``cursor`` to continue."""

    messages: list[Message]
    next_cursor: str | None = Field(default=None, description="Opaque; absent when there is nothing more.")
    reason: str | None = Field(
        default=None, description="Why the page ended: limit reached, range exhausted, budget exhausted."
    )
    stats: ScanStats | None = None
    notes: list[str] = Field(default_factory=list)
    cli: str = Field(description="The equivalent `logtrove` command.")


# -- histograms ---------------------------------------------------------------------------
class HistogramBucket(_Model):
    start_ms: int
    end_ms: int = Field(description="Exclusive.")
    records: int = Field(description="Data records stamped within [start_ms, end_ms).")
    decoded: int = Field(
        default=0,
        description="How many of them were counted from record timestamps (the rest from "
        "index summaries and batch headers).",
    )


class PartitionHistogram(_Model):
    partition: int
    records: int = Field(description="Records of this partition in the whole range.")
    size_bytes: int = Field(description="Bytes of the partition's log on disk (every segment).")
    counts: list[int] | None = Field(
        default=None, description="Records per bucket of this partition (with by_partition=true)."
    )


class TopicHistogram(_Model):
    """Records per time bucket, counted by the records' own timestamps (see
    ``logtrove.query.histogram`` for what is counted, and how)."""

    topic: str
    from_ms: int | None = Field(description="Start of the first bucket; null for a topic without records.")
    to_ms: int | None = Field(description="End (exclusive) of the last bucket.")
    bucket: str = Field(description="Bucket width in words: second, minute, hour, day, …")
    bucket_ms: int = Field(description="Bucket width; the first and last bucket may be clipped by the range.")
    records: int = Field(description="Sum of the buckets.")
    buckets: list[HistogramBucket]
    partitions: list[PartitionHistogram]
    exact: str = Field(description="What the counts count.")
    blocks_counted: int = Field(description="Index blocks settled by their summary (count and time bounds).")
    batches_counted: int = Field(description="Batches counted whole from their header and a summary's bound.")
    batches_scanned: int = Field(description="Batches whose record timestamps were read.")
    elapsed_ms: float


# -- lag history ---------------------------------------------------------------------------
class LagPoint(_Model):
    t: int = Field(description="Sample time, epoch ms.")
    lag: int = Field(description="Records not yet consumed on the topic.")
    time_lag_ms: int | None = Field(description="Age of the first unconsumed record; 0 when caught up.")


class TopicLagHistory(_Model):
    topic: str
    points: list[LagPoint]


class GroupLagHistory(_Model):
    group: str
    sampling: bool = Field(description="Whether this server samples (only a writable server does).")
    topics: list[TopicLagHistory]


# -- produce ----------------------------------------------------------------------------
class ProduceRecord(_Model):
    key: str | None = None
    key_b64: str | None = None
    value: Any = Field(
        default=None, description="A string, or any JSON value (stored as compact JSON); null = tombstone."
    )
    value_b64: str | None = None
    headers: dict[str, str | None] | list[tuple[str, str | None]] = Field(default_factory=dict)
    timestamp: int | None = Field(default=None, ge=0, le=2**53, description="Epoch ms; default now.")
    partition: int | None = Field(default=None, ge=0, le=9_999)


class ProduceRequest(_Model):
    records: list[ProduceRecord] = Field(min_length=1, max_length=10_000)
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"


class ProducedOffset(_Model):
    partition: int
    offset: int


class ProduceResult(_Model):
    topic: str
    offsets: list[ProducedOffset] = Field(description="One per input record, in input order.")


# -- groups and lag ---------------------------------------------------------------------
class PartitionLag(_Model):
    topic: str
    partition: int
    log_start_offset: int | None
    log_end_offset: int
    committed_offset: int | None = Field(description="null: the group never committed here.")
    commit_timestamp: int | None
    never_committed: bool
    lag: int | None = Field(
        description="Messages not yet consumed, to the last stable offset (read_committed); "
        "null when never committed."
    )
    time_lag_ms: int | None = Field(description="Age of the first unconsumed record; 0 when caught up.")
    tags: str | None = Field(description="The group's tag subscription on this topic, if any.")
    tag_lag: int | None = Field(
        description="Unconsumed records matching the tag subscription (exact; aborted records left out)."
    )
    tag_time_lag_ms: int | None = Field(description="Age of the first unconsumed matching record.")
    last_stable_offset: int | None = Field(
        default=None, description="Where the lag is measured to: the first offset of an open transaction."
    )


class TopicLag(_Model):
    topic: str
    tags: str | None
    lag: int
    time_lag_ms: int | None
    tag_lag: int | None
    tag_time_lag_ms: int | None
    never_committed_partitions: int


class GroupSummary(_Model):
    group: str
    state: str = Field(description="Live state from the broker, else Empty (commits only).")
    type: str | None = Field(
        default=None,
        description="The group's protocol: classic, or consumer (KIP-848); null without a broker.",
    )
    members: int | None = Field(description="Live members (null without a broker).")
    topics: list[str]
    lag: int
    time_lag_ms: int | None
    tag_lag: int | None
    never_committed_partitions: int


class GroupDetail(GroupSummary):
    topic_lags: list[TopicLag]
    partitions: list[PartitionLag]
    subscriptions: dict[str, str] = Field(description="Topic → tag subscription.")
    member_list: list[dict[str, Any]] = Field(default_factory=list)


class SetTagSubscription(_Model):
    tags: str = Field(min_length=1, max_length=1000, description="`TagA || TagB`, or `*`.")


class TagSubscriptionInfo(_Model):
    group: str
    topic: str
    tags: str = Field(description="The expression in canonical form.")
    updated_ms: int


# -- compaction ------------------------------------------------------------------------
class PartitionCompaction(_Model):
    partition: int
    first_dirty_offset: int
    log_end_offset: int
    dirty_ratio: float
    min_cleanable_dirty_ratio: float
    last_clean_ms: int | None
    uncleanable_reason: str | None
    last_stats: dict[str, Any] | None


class TopicCompaction(_Model):
    topic: str
    cleanup_policy: str
    compacted: bool
    partitions: list[PartitionCompaction]
