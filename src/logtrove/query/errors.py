"""Errors raised by the query layer.

::

    QueryError
     ├── InvalidQueryError      a malformed question: bad regex, bad JSON path, bad cursor,
     │                          an empty time range, a limit below 1
     └── MessageNotFoundError   a by-offset or by-position-ID read found no record at or
                                after the offset (only control batches follow it)

Unknown topics or partitions and offsets past the log end raise the storage layer's errors
(:class:`~logtrove.storage.UnknownTopicError`, :class:`~logtrove.storage.OffsetOutOfRangeError`).
"""

from __future__ import annotations


class QueryError(Exception):
    """Base class of query errors."""


class InvalidQueryError(QueryError, ValueError):
    """The question cannot be asked as given."""


class MessageNotFoundError(QueryError):
    """No record at or after the requested offset."""
