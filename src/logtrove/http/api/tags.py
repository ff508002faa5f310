"""Tag-filtered reads and exact tag counts of a partition, answered next to the data.

A consumer that wants ``TagA || TagB`` fetches from
``/topics/{t}/partitions/{p}/tags/fetch``: the broker finds the matching offsets in
``.tagidx`` (:func:`~logtrove.groups.tags.fetch_matching`, as a local
:class:`~logtrove.groups.consumer.TagConsumer` does), reads only the batches holding
them, and sends only those records. ``next_offset`` is the offset after the last
*examined* record, so a consumer that commits it moves past the skipped records and its
lag reaches 0 once it has every match::

    offset                      last examined     next_offset          log end
      │ skip  match  skip  skip  match │               │                   │
      └── examined: matches returned ─┘◀── continue here (and commit) ───▶│

``/tags/count`` counts the matches of an offset range exactly (``count_matching``) and
gives the first one's timestamp: the tag-aware lag of a group whose committed offset is
the range's start, for clients that are not on the broker's machine (``logtrove lag
--bootstrap``). Both answers carry the data directory's ``cluster_id`` so a client can
check that it talks to the broker it commits to.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from logtrove.groups.tags import TagFilter, count_matching, fetch_matching, first_matching
from logtrove.http.api.messages import READ_COMMITTED, IsolationParam
from logtrove.http.api.topics import PartitionPath, StorageDep, TopicPath
from logtrove.http.models import Message
from logtrove.http.problems import bad_request, problem_responses
from logtrove.http.render import render_message
from logtrove.query import Message as QueryMessage
from logtrove.records import Record
from logtrove.storage import OffsetOutOfRangeError, PartitionLog, Storage
from logtrove.storage.txnview import committed_view

router = APIRouter(prefix="/api/v1", tags=["tags"])

MAX_SCAN_RECORDS = 50_000  # un-indexed records one fetch may scan (it then returns what it has)

TagsQuery = Annotated[
    str, Query(min_length=1, max_length=1000, description="`TagA || TagB`, or `*` for every record.")
]
OffsetQuery = Annotated[
    int | None, Query(ge=0, le=2**62, description="First offset to examine; default the log start.")
]


class TagFetchPage(BaseModel):
    """Matching records of one partition from ``offset`` on."""

    model_config = ConfigDict(extra="forbid")

    topic: str
    partition: int
    tags: str = Field(description="The expression in canonical form.")
    offset: int = Field(description="Where examining started (the log start if the request was below it).")
    next_offset: int = Field(
        description="Continue, and commit, here: every offset before it was examined and its "
        "matches are in `messages`."
    )
    log_start_offset: int
    log_end_offset: int
    reason: Literal["log end", "limit reached", "scan budget exhausted"] = Field(
        description="Why the page ended: the log end was reached, `max_records` / `max_bytes` "
        "was reached, or the un-indexed records one request may scan were scanned."
    )
    messages: list[Message]
    cluster_id: str = Field(description="The data directory's cluster ID (the broker's).")


class TagCountResult(BaseModel):
    """How many records of ``[offset, end_offset)`` match, exactly."""

    model_config = ConfigDict(extra="forbid")

    topic: str
    partition: int
    tags: str = Field(description="The expression in canonical form.")
    offset: int
    end_offset: int = Field(description="End of the counted range (at most the log end offset).")
    log_start_offset: int
    log_end_offset: int
    matching: int = Field(description="Records in the range whose tag the expression wants.")
    first_match_offset: int | None = Field(description="The first of them; null when there is none.")
    first_match_timestamp: int | None
    entries_read: int = Field(description=".tagidx entries looked at.")
    records_scanned: int = Field(description="Records decoded from the log (un-indexed parts, re-checks).")
    cluster_id: str


def _parse_tags(expression: str) -> TagFilter:
    try:
        return TagFilter.parse(expression)
    except ValueError as exc:  # InvalidTagExpressionError, or text that is not UTF-8 encodable
        raise bad_request(f"invalid tag expression: {exc}", "invalid-tags") from None


def _checked_start(log: PartitionLog, offset: int | None) -> int:
    """``offset`` raised to the log start; past the log end is an error (as in Kafka)."""
    start, end = log.log_start_offset, log.log_end_offset
    if offset is not None and offset > end:
        raise OffsetOutOfRangeError(
            f"offset {offset} is past the log end offset {end} of {log.tp.topic}-{log.tp.partition}",
            log_start_offset=start,
            log_end_offset=end,
        )
    return start if offset is None else max(offset, start)


def _record_bytes(record: Record) -> int:
    headers = sum(len(k) + len(v or b"") for k, v in record.headers)
    return len(record.key or b"") + len(record.value or b"") + headers


def _within_bytes(records: list[Record], max_bytes: int) -> list[Record]:
    """The longest prefix of ``records`` within ``max_bytes`` of keys, values and headers,
    and never less than one record (so a large record still makes progress)."""
    total = 0
    for n, record in enumerate(records):
        total += _record_bytes(record)
        if total > max_bytes and n > 0:
            return records[:n]
    return records


@router.get(
    "/topics/{topic}/partitions/{partition}/tags/fetch",
    summary="The records with wanted tags from an offset on, filtered on the broker with .tagidx",
    responses=problem_responses(404, 422),
)
def tag_fetch(
    topic: TopicPath,
    partition: PartitionPath,
    storage: StorageDep,
    tags: TagsQuery = "*",
    offset: OffsetQuery = None,
    max_records: Annotated[int, Query(ge=1, le=10_000, description="Most records to return.")] = 500,
    max_bytes: Annotated[
        int,
        Query(
            ge=1,
            le=64 << 20,
            description="Budget of key, value and header bytes (one record is returned even if larger).",
        ),
    ] = 1 << 20,
    isolation: IsolationParam = READ_COMMITTED,
) -> TagFetchPage:
    wanted = _parse_tags(tags)
    log = storage.log(topic, partition)
    start = _checked_start(log, offset)
    view = committed_view(log) if isolation == READ_COMMITTED else None
    fetched = fetch_matching(
        log, wanted, start, max_records, max_scan_records=MAX_SCAN_RECORDS, committed=view
    )
    records = _within_bytes(fetched.records, max_bytes)
    next_offset = fetched.next_offset if len(records) == len(fetched.records) else records[-1].offset + 1
    if next_offset >= fetched.log_end_offset:
        reason: Literal["log end", "limit reached", "scan budget exhausted"] = "log end"
    elif len(records) < len(fetched.records) or len(records) >= max_records:
        reason = "limit reached"
    else:
        reason = "scan budget exhausted"
    id_header = storage.topic(topic).config.message_id_header
    return TagFetchPage(
        topic=topic,
        partition=partition,
        tags=str(wanted),
        offset=start,
        next_offset=next_offset,
        log_start_offset=log.log_start_offset,
        log_end_offset=fetched.log_end_offset,
        reason=reason,
        messages=[render_message(QueryMessage.of(topic, partition, r), id_header=id_header) for r in records],
        cluster_id=_cluster_id(storage),
    )


@router.get(
    "/topics/{topic}/partitions/{partition}/tags/count",
    summary="The exact number of records with wanted tags in an offset range (tag-aware lag)",
    responses=problem_responses(404, 422),
)
def tag_count(
    topic: TopicPath,
    partition: PartitionPath,
    storage: StorageDep,
    tags: TagsQuery = "*",
    offset: OffsetQuery = None,
    end_offset: Annotated[
        int | None,
        Query(ge=0, le=2**62, description="End of the range (exclusive); default and at most the log end."),
    ] = None,
    isolation: IsolationParam = READ_COMMITTED,
) -> TagCountResult:
    wanted = _parse_tags(tags)
    log = storage.log(topic, partition)
    start = _checked_start(log, offset)
    log_end = log.log_end_offset
    end = log_end if end_offset is None else min(end_offset, log_end)
    if end < start:
        raise bad_request(f"end_offset {end_offset} is before offset {start}", "invalid-range")
    view = committed_view(log) if isolation == READ_COMMITTED else None
    counted = count_matching(log, wanted, start, end, view)
    first = first_matching(log, wanted, start, view) if counted.matching else None
    return TagCountResult(
        topic=topic,
        partition=partition,
        tags=str(wanted),
        offset=start,
        end_offset=end,
        log_start_offset=log.log_start_offset,
        log_end_offset=log_end,
        matching=counted.matching,
        first_match_offset=first.offset if first is not None else None,
        first_match_timestamp=first.timestamp if first is not None else None,
        entries_read=counted.entries_read,
        records_scanned=counted.records_scanned,
        cluster_id=_cluster_id(storage),
    )


def _cluster_id(storage: Storage) -> str:
    return storage.data_dir.cluster_id
