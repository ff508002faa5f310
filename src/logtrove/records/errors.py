"""Errors raised by the record batch codec.

::

    RecordsError                    anything wrong with record bytes
     ├── CorruptBatchError          bytes that are not a valid v2 batch
     │    ├── InvalidMagicError     magic byte is not 2
     │    ├── InvalidLengthError    batchLength disagrees with the bytes present
     │    ├── CrcMismatchError      CRC32C over attributes..end does not match
     │    ├── InvalidRecordCountError  recordCount / lastOffsetDelta / records disagree
     │    └── CorruptRecordError    a record inside the batch cannot be decoded
     │         └── DecompressionLimitError  the records decompress to more than the limit
     ├── OffsetOverflowError        assigned offsets would not fit in an int64
     └── UnsupportedCompressionError  compression codec id 5..7
"""

from __future__ import annotations


class RecordsError(Exception):
    """Base class of every records error."""


class CorruptBatchError(RecordsError):
    """The bytes are not a valid RecordBatch v2."""


class InvalidMagicError(CorruptBatchError):
    """The magic byte is not 2 (only RecordBatch v2 is supported)."""


class InvalidLengthError(CorruptBatchError):
    """``batchLength`` disagrees with the number of bytes present (truncated or trailing)."""


class CrcMismatchError(CorruptBatchError):
    """The stored CRC32C does not match the computed one."""


class InvalidRecordCountError(CorruptBatchError):
    """``recordCount``, ``lastOffsetDelta`` and the records present disagree."""


class CorruptRecordError(CorruptBatchError):
    """A record inside an otherwise well-framed batch cannot be decoded."""


class DecompressionLimitError(CorruptRecordError):
    """A compressed batch would decompress to more bytes than allowed (a decompression
    bomb, or a topic whose limit is too small: see :mod:`logtrove.records.compression`)."""


class OffsetOverflowError(RecordsError):
    """Offsets assigned to a batch would exceed the int64 range."""


class UnsupportedCompressionError(RecordsError):
    """The compression codec id is not one of none, gzip, snappy, lz4, zstd."""
