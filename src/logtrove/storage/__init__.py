"""Segmented, indexed partition logs on disk (DESIGN.md §3).

Public API: :class:`Storage` (a data directory: topics, logs, checkpoints),
:class:`PartitionLog` (append / read / lookups / retention of one partition),
:class:`Segment`, :class:`TopicConfig`, and the errors in :mod:`.errors`.
storage knows nothing of the network, HTTP or Spark.
"""

from logtrove.storage.checkpoint import recorded_index_offsets
from logtrove.storage.config import CONFIG_BY_NAME, CONFIG_DEFS, SOURCE_CONFIGS, ConfigDef, TopicConfig
from logtrove.storage.errors import (
    CorruptIndexError,
    DataDirError,
    DataDirLockedError,
    FollowedTopicChangeError,
    FollowedTopicError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    PartitionLimitError,
    ReadOnlyError,
    RecordTooLargeError,
    SegmentsChangedError,
    StorageError,
    TooManyOpenFilesError,
    TopicError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
    UnsafePartitionError,
)
from logtrove.storage.log import (
    AppendResult,
    FileSlice,
    PartitionLog,
    ReadResult,
    TimestampOffset,
    TopicPartition,
)
from logtrove.storage.segment import Segment
from logtrove.storage.segmentnames import segment_file_name
from logtrove.storage.segmentscan import Span
from logtrove.storage.store import DEFAULT_MAX_TOTAL_PARTITIONS, Storage, TopicInfo, check_topic_name

__all__ = [
    "CONFIG_BY_NAME",
    "CONFIG_DEFS",
    "DEFAULT_MAX_TOTAL_PARTITIONS",
    "SOURCE_CONFIGS",
    "AppendResult",
    "ConfigDef",
    "CorruptIndexError",
    "DataDirError",
    "DataDirLockedError",
    "FileSlice",
    "FollowedTopicChangeError",
    "FollowedTopicError",
    "InvalidConfigError",
    "InvalidRecordError",
    "InvalidTopicError",
    "OffsetOutOfRangeError",
    "PartitionLimitError",
    "PartitionLog",
    "ReadOnlyError",
    "ReadResult",
    "RecordTooLargeError",
    "Segment",
    "SegmentsChangedError",
    "Span",
    "Storage",
    "StorageError",
    "TimestampOffset",
    "TooManyOpenFilesError",
    "TopicConfig",
    "TopicError",
    "TopicExistsError",
    "TopicInfo",
    "TopicPartition",
    "UnknownPartitionError",
    "UnknownTopicError",
    "UnsafePartitionError",
    "check_topic_name",
    "recorded_index_offsets",
    "segment_file_name",
]
