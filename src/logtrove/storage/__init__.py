"""Segmented, indexed partition logs on disk (DESIGN.md §3).

Public API: :class:`Storage` (a data directory: topics, logs, checkpoints),
:class:`PartitionLog` (append / read / lookups / retention of one partition),
:class:`Segment`, :class:`TopicConfig`, and the errors in :mod:`.errors`.
storage knows nothing of the network, HTTP or Spark.
"""

from logtrove.storage.config import CONFIG_BY_NAME, CONFIG_DEFS, ConfigDef, TopicConfig
from logtrove.storage.errors import (
    CorruptIndexError,
    CorruptLogError,
    DataDirError,
    DataDirLockedError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RecordTooLargeError,
    SegmentsChangedError,
    StorageError,
    TopicError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logtrove.storage.log import (
    AppendResult,
    FileSlice,
    PartitionLog,
    ReadResult,
    TimestampOffset,
    TopicPartition,
)
from logtrove.storage.segment import Segment, segment_file_name
from logtrove.storage.store import Storage, TopicInfo, check_topic_name

__all__ = [
    "CONFIG_BY_NAME",
    "CONFIG_DEFS",
    "AppendResult",
    "ConfigDef",
    "CorruptIndexError",
    "CorruptLogError",
    "DataDirError",
    "DataDirLockedError",
    "FileSlice",
    "InvalidConfigError",
    "InvalidRecordError",
    "InvalidTopicError",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "ReadOnlyError",
    "ReadResult",
    "RecordTooLargeError",
    "Segment",
    "SegmentsChangedError",
    "Storage",
    "StorageError",
    "TimestampOffset",
    "TopicConfig",
    "TopicError",
    "TopicExistsError",
    "TopicInfo",
    "TopicPartition",
    "UnknownPartitionError",
    "UnknownTopicError",
    "check_topic_name",
    "segment_file_name",
]
