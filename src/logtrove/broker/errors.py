"""Storage and records exceptions as Kafka error codes, for the broker's answers."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from logtrove.records import (
    CorruptRecordError,
    InvalidRecordCountError,
    RecordsError,
    UnsupportedCompressionError,
)
from logtrove.storage import (
    FollowedTopicChangeError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    PartitionLimitError,
    ReadOnlyError,
    RecordTooLargeError,
    StorageError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)

_ERRORS: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (UnknownTopicError, ErrorCode.unknown_topic_or_partition),
    (UnknownPartitionError, ErrorCode.unknown_topic_or_partition),
    (OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (RecordTooLargeError, ErrorCode.message_too_large),
    (InvalidRecordError, ErrorCode.invalid_record),
    (TopicExistsError, ErrorCode.topic_already_exists),
    (InvalidTopicError, ErrorCode.invalid_topic_exception),
    (InvalidConfigError, ErrorCode.invalid_config),
    (ReadOnlyError, ErrorCode.policy_violation),
    # as Kafka's LogValidator: a record that does not parse, or a count that lies, is an
    # InvalidRecordException (not retriable); a bad CRC or frame stays CORRUPT_MESSAGE
    (CorruptRecordError, ErrorCode.invalid_record),
    (InvalidRecordCountError, ErrorCode.invalid_record),
    (UnsupportedCompressionError, ErrorCode.unsupported_compression_type),
    (PartitionLimitError, ErrorCode.policy_violation),
    (FollowedTopicChangeError, ErrorCode.policy_violation),
    (RecordsError, ErrorCode.corrupt_message),
    (StorageError, ErrorCode.kafka_storage_error),
)


def error_code(exc: BaseException) -> ErrorCode:
    """The Kafka error code for a storage or records exception."""
    for cls, code in _ERRORS:
        if isinstance(exc, cls):
            return code
    return ErrorCode.unknown_server_error
