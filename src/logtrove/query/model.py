"""The values of the query layer: questions, results, completion, cursors."""

from __future__ import annotations

import base64
import binascii
import enum
import json
from collections.abc import Generator, Iterator
from dataclasses import dataclass

from logtrove.query.errors import InvalidQueryError
from logtrove.query.ids import position_id
from logtrove.query.predicates import Predicate
from logtrove.records import Headers, Record


@dataclass(frozen=True, slots=True)
class Message:
    """One record found by a query, with where it lives."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    @property
    def id(self) -> str:
        """The broker position ID: decodes straight back to this record."""
        return position_id(self.topic, self.partition, self.offset)

    def header(self, name: str) -> bytes | None:
        found = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found

    @classmethod
    def of(cls, topic: str, partition: int, record: Record) -> Message:
        return cls(
            topic, partition, record.offset, record.timestamp, record.key, record.value, record.headers
        )


class Reason(enum.StrEnum):
    """Why a query stopped."""

    LIMIT = "limit reached"
    EXHAUSTED = "range exhausted"
    BUDGET = "budget exhausted"
    HINT = "found in the ID's time window"


@dataclass
class Stats:
    """What a query read: updated as it runs (shared by parallel partition workers,
    which only add integers)."""

    bytes_scanned: int = 0
    records_scanned: int = 0
    batches_prefiltered: int = 0
    segments_scanned: int = 0
    segments_skipped: int = 0
    blocks_skipped: int = 0
    index_candidates: int = 0
    index_false_hits: int = 0


@dataclass(frozen=True)
class Completion:
    """How a query ended: the reason, what it read, and a cursor to continue from
    (``None`` when nothing is left)."""

    reason: Reason
    results: int
    stats: Stats
    cursor: str | None = None
    notes: tuple[str, ...] = ()


# -- questions ---------------------------------------------------------------------------
@dataclass(frozen=True)
class OffsetQuery:
    """The record at ``offset`` of one partition, or the next surviving one (the first
    record when ``offset`` is below the log start; past the log end is an error)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class PositionQuery:
    """The record a broker position ID names, or the next surviving one, as
    :class:`OffsetQuery` answers for the decoded topic, partition and offset."""

    position_id: str


@dataclass(frozen=True)
class TimeQuery:
    """In each partition, the first record (offset order) with timestamp ≥ ``timestamp``."""

    topic: str
    timestamp: int
    partitions: tuple[int, ...] | None = None


@dataclass(frozen=True)
class RangeQuery:
    """Records with ``start_ms <= timestamp < end_ms``, in offset order per partition."""

    topic: str
    start_ms: int
    end_ms: int
    partitions: tuple[int, ...] | None = None
    limit: int | None = None
    cursor: str | None = None


@dataclass(frozen=True)
class KeyQuery:
    """Every record whose key is ``key``, newest first."""

    topic: str
    key: bytes
    partitions: tuple[int, ...] | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    limit: int | None = None
    cursor: str | None = None


@dataclass(frozen=True)
class HeaderQuery:
    """Every record carrying header ``name`` = ``value``, newest first."""

    topic: str
    name: str
    value: bytes
    partitions: tuple[int, ...] | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    limit: int | None = None
    cursor: str | None = None


@dataclass(frozen=True)
class IdQuery:
    """Records whose client message ID (the topic's ID header) is ``message_id``, newest
    first, and the record ``message_id`` names if it is a position ID of this topic.
    With a time-ordered ID, the records stamped within ``hint_window_ms`` of its time are
    searched first and the search stops there if it found the message, unless
    ``exhaustive``; when nothing there matches (the client's clock was off), everything is."""

    topic: str
    message_id: str
    partitions: tuple[int, ...] | None = None
    limit: int | None = None
    cursor: str | None = None
    exhaustive: bool = False
    hint_window_ms: int = 10 * 60_000


@dataclass(frozen=True)
class ContentQuery:
    """Records whose value satisfies ``predicate``, within an optional time window and
    offset range, all partitions in parallel, reading at most ``budget_bytes``."""

    topic: str
    predicate: Predicate
    partitions: tuple[int, ...] | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    limit: int | None = None
    cursor: str | None = None
    budget_bytes: int | None = 1 << 30


Query = OffsetQuery | PositionQuery | TimeQuery | RangeQuery | KeyQuery | HeaderQuery | IdQuery | ContentQuery


# -- results -----------------------------------------------------------------------------
@dataclass
class QueryResult(Iterator[Message]):
    """Messages as they are found; :attr:`completion` is set once iteration ends."""

    _source: Generator[Message, None, Completion]
    completion: Completion | None = None

    def __iter__(self) -> QueryResult:
        return self

    def __next__(self) -> Message:
        try:
            return next(self._source)
        except StopIteration as stop:
            self.completion = stop.value
            raise StopIteration from None

    def all(self) -> tuple[list[Message], Completion]:
        """Every message, and the completion."""
        messages = list(self)
        assert self.completion is not None
        return messages, self.completion

    def close(self) -> None:
        """Stop early (parallel workers are told to stop)."""
        self._source.close()


# -- cursors -----------------------------------------------------------------------------
def encode_cursor(kind: str, positions: dict[int, int]) -> str:
    """An opaque cursor: per partition, where the next page starts."""
    raw = json.dumps({"k": kind, "p": {str(p): o for p, o in sorted(positions.items())}}).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(kind: str, cursor: str | None) -> dict[int, int] | None:
    """The positions of a cursor made by the same kind of query; ``None`` for no cursor."""
    if cursor is None:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if data["k"] != kind:
            raise InvalidQueryError(f"this cursor belongs to a {data['k']} query, not a {kind} query")
        return {int(p): int(o) for p, o in data["p"].items()}
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, InvalidQueryError):
            raise
        raise InvalidQueryError(f"malformed cursor {cursor!r}") from None
