"""The Kafka RecordBatch v2 codec.

Batches travel opaquely through produce and fetch; this package frames, validates and
patches them (:mod:`.batch`), splits bytes holding batches back to back (a Fetch answer)
into whole batches and a torn tail (:mod:`.split`), walks a produced batch's records in
compiled code (:mod:`.walk`), decodes runs of batches into Arrow buffers for the bulk
readers (:mod:`.columnar`, compiled too) and, off the hot path, decodes, builds and
recompresses their records (:mod:`.record`, :mod:`.builder`) in all four compressions
(:mod:`.compression`, which bounds how much a batch may decompress to).
"""

from logtrove.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    assign_offsets,
    peek_batch_size,
    read_header,
    set_base_offset,
    set_log_append_time,
    validate_batch,
    validate_produced_batch,
)
from logtrove.records.builder import build_batch, recompress_batch
from logtrove.records.compression import Compression
from logtrove.records.errors import (
    CorruptBatchError,
    CorruptRecordError,
    CrcMismatchError,
    DecompressionLimitError,
    InvalidLengthError,
    InvalidMagicError,
    InvalidRecordCountError,
    OffsetOverflowError,
    RecordsError,
    UnsupportedCompressionError,
)
from logtrove.records.markers import MarkerType, marker_batch, marker_type
from logtrove.records.record import Headers, NewRecord, Record, count_records, iter_keys, iter_records
from logtrove.records.split import Split, whole_batches

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "BatchHeader",
    "Compression",
    "CorruptBatchError",
    "CorruptRecordError",
    "CrcMismatchError",
    "DecompressionLimitError",
    "Headers",
    "InvalidLengthError",
    "InvalidMagicError",
    "InvalidRecordCountError",
    "MarkerType",
    "NewRecord",
    "OffsetOverflowError",
    "Record",
    "RecordsError",
    "Split",
    "UnsupportedCompressionError",
    "assign_offsets",
    "build_batch",
    "count_records",
    "iter_keys",
    "iter_records",
    "marker_batch",
    "marker_type",
    "peek_batch_size",
    "read_header",
    "recompress_batch",
    "set_base_offset",
    "set_log_append_time",
    "validate_batch",
    "validate_produced_batch",
    "whole_batches",
]
