"""Find any message: by offset, time, time range, message ID, key, header and content.

One entry point, :meth:`QueryEngine.run`, takes a question (:data:`Query`) and returns a
:class:`QueryResult` that streams :class:`Message` values and ends with a
:class:`Completion` (reason, bytes and segments read, cursor). It reads the derived
index files written by :mod:`logtrove.storage.derived.indexer` and scans what they do not cover,
so answers are complete whatever the indexer's progress. See :mod:`.engine`.
"""

from logtrove.query.engine import QueryEngine
from logtrove.query.errors import InvalidQueryError, MessageNotFoundError, QueryError
from logtrove.query.histogram import (
    MAX_BUCKETS,
    UNITS,
    BucketPlan,
    Histogram,
    HistogramTimeoutError,
    PartitionCounts,
    histogram,
    pick_bucket,
    topic_span,
)
from logtrove.query.ids import MessageIdGenerator, decode_position_id, id_time, position_id
from logtrove.query.model import (
    Completion,
    ContentQuery,
    HeaderQuery,
    IdQuery,
    KeyQuery,
    Message,
    OffsetQuery,
    PositionQuery,
    Query,
    QueryResult,
    RangeQuery,
    Reason,
    Stats,
    TimeQuery,
)
from logtrove.query.predicates import Contains, JsonField, Predicate, Regex

__all__ = [
    "MAX_BUCKETS",
    "UNITS",
    "BucketPlan",
    "Completion",
    "Contains",
    "ContentQuery",
    "HeaderQuery",
    "Histogram",
    "HistogramTimeoutError",
    "IdQuery",
    "InvalidQueryError",
    "JsonField",
    "KeyQuery",
    "Message",
    "MessageIdGenerator",
    "MessageNotFoundError",
    "OffsetQuery",
    "PartitionCounts",
    "PositionQuery",
    "Predicate",
    "Query",
    "QueryEngine",
    "QueryError",
    "QueryResult",
    "RangeQuery",
    "Reason",
    "Regex",
    "Stats",
    "TimeQuery",
    "decode_position_id",
    "histogram",
    "id_time",
    "pick_bucket",
    "position_id",
    "topic_span",
]
