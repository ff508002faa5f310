"""Errors raised by the storage layer.

::

    StorageError
     ├── DataDirError                   the data directory cannot be used
     │    ├── DataDirLockedError        another writer holds the lock (names the holder)
     │    ├── UnsafePartitionError      a partition directory reaches out of the data
     │    │                             directory by a symbolic link (not opened)
     │    └── ReadOnlyError             a write was attempted on a read-only opening
     ├── TopicError
     │    ├── TopicExistsError
     │    ├── UnknownTopicError
     │    ├── UnknownPartitionError
     │    └── InvalidTopicError         bad name or partition count
     │         └── FollowedTopicError   a client write to a topic a mirror follows
     ├── FollowedTopicChangeError       a client's change of what a followed topic takes
     │                                  from its source (partitions, source configs)
     ├── InvalidConfigError             unknown config name or bad value
     ├── OffsetOutOfRangeError          offset below the log start or past the log end
     ├── RecordTooLargeError            batch larger than max.message.bytes
     ├── InvalidRecordError             a batch the topic refuses (e.g. a keyless record on a
     │                                  compacted topic)
     ├── SegmentsChangedError           retention or truncation removed segments a clean was
     │                                  rewriting (the clean is retried, not an error)
     ├── CleanCancelledError            a clean stopped because the cleaner is stopping (nothing
     │                                  swapped in; the next round starts over)
     ├── CorruptIndexError              an index file failed its sanity check (rebuilt, never fatal)
     ├── TooManyOpenFilesError          the process ran out of file descriptors (EMFILE)
     └── PartitionLimitError            a creation would pass the broker's total partition cap

Batches that fail validation raise :class:`logtrove.records.CorruptBatchError` (from the
records layer) before anything is appended; a log file that recovery cannot read is
truncated at its last valid batch, not refused.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class of storage errors."""


class DataDirError(StorageError):
    """The data directory cannot be used as asked."""


class DataDirLockedError(DataDirError):
    """Another process holds the writer lock of the data directory; ``holder`` says
    which (pid, command, since when, host), for commands that give their own advice."""

    def __init__(self, message: str, holder: str = "") -> None:
        super().__init__(message)
        self.holder = holder


class UnsafePartitionError(DataDirError):
    """A partition directory that is, or holds, a symbolic link: logtrove truncates,
    rewrites and deletes the files of the partitions it opens, and a link would take
    that to files outside the data directory, which it did not write. Such a partition
    is not opened (the others are); the message names the link and what to do."""


class ReadOnlyError(DataDirError):
    """A write was attempted through a read-only opening of the data directory."""


class TopicError(StorageError):
    """Base class of topic errors."""


class TopicExistsError(TopicError):
    """A topic of that name already exists."""


class UnknownTopicError(TopicError):
    """No topic of that name exists."""


class UnknownPartitionError(TopicError):
    """The topic has no partition of that number."""


class InvalidTopicError(TopicError):
    """Bad topic name or partition count."""


class FollowedTopicError(InvalidTopicError):
    """A client tried to write to a topic that a mirror follows (it is read-only until
    promoted). Kafka answers a client's write to a topic it may not append to (its
    internal topics) with INVALID_TOPIC_EXCEPTION, which clients do not retry; so does
    logtrove, through this subclass."""


class FollowedTopicChangeError(StorageError):
    """A client asked to change what a followed (mirrored) topic takes from its source:
    its partition count or one of :data:`~logtrove.storage.config.SOURCE_CONFIGS`. The
    mirror would undo it, and meanwhile the copy would differ from the source (three
    partitions where the source has one). Kafka has no mirrored topics; its answer to a
    well-formed admin request that the broker's rules refuse is POLICY_VIOLATION (the
    create-topic and alter-config policies), which the broker answers here too."""


class InvalidConfigError(StorageError):
    """An unknown config name or a value of the wrong type or range."""


class OffsetOutOfRangeError(StorageError):
    """The offset is below the log start offset or past the log end offset."""

    def __init__(self, message: str, *, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(StorageError):
    """A batch is larger than the topic's ``max.message.bytes``."""


class InvalidRecordError(StorageError):
    """A well-formed batch that the topic refuses (e.g. keyless records on a compacted topic).

    ``record_errors`` names the offending records as Kafka's Produce v8+ does (KIP-467):
    ``(index of the record in its batch, message)``; the other records of the batch fail
    with it and clients report them as failed because of another record."""

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class SegmentsChangedError(StorageError):
    """The segments a clean was rewriting changed under it (retention, DeleteRecords)."""


class CleanCancelledError(StorageError):
    """A clean was stopped (the broker is shutting down); nothing was swapped in for
    the group being copied, and the next round starts over."""


class CorruptIndexError(StorageError):
    """An index file failed its sanity check; the caller rebuilds it from the log."""


class TooManyOpenFilesError(StorageError):
    """The process ran out of file descriptors; the message says to raise ``ulimit -n``
    or lower ``--max-partitions``. Nothing half-made is left behind."""


class PartitionLimitError(StorageError):
    """A topic creation or partition increase would pass the total partition cap
    (``serve --max-partitions``)."""
