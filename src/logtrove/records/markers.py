"""Transaction markers: the control batches that end a transaction in a partition.

A marker is a RecordBatch v2 with the transactional (bit 4) and control (bit 5)
attributes set, the transaction's producer ID and epoch, no sequence (-1), and one record
whose key and value are Kafka's ``EndTransactionMarker``::

    key   ┌─────────────┬──────────────────────────┐
          │ version i16 │ type i16                 │
          │ = 0         │ 0 = ABORT, 1 = COMMIT    │
          └─────────────┴──────────────────────────┘
    value ┌─────────────┬──────────────────────────┐
          │ version i16 │ coordinator_epoch i32    │
          │ = 0         │                          │
          └─────────────┴──────────────────────────┘

Consumers skip control batches; a read_committed consumer uses the ABORT markers (with
the aborted-transaction list of the Fetch response) to drop the aborted batches. The
format is read here and nowhere else: the transaction coordinator writes markers with
:func:`marker_batch`, and storage's transaction state, the committed view, the cleaner
and the clients read them with :func:`marker_type`.
"""

from __future__ import annotations

import enum
import struct

from logtrove.records.batch import BatchHeader
from logtrove.records.builder import build_batch
from logtrove.records.errors import RecordsError
from logtrove.records.record import NewRecord, iter_records

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
MARKER_VERSION = 0


class MarkerType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


def marker_batch(
    producer_id: int, producer_epoch: int, commit: bool, *, coordinator_epoch: int, now_ms: int
) -> bytes:
    """One COMMIT or ABORT marker of ``producer_id`` at ``producer_epoch``."""
    kind = MarkerType.COMMIT if commit else MarkerType.ABORT
    record = NewRecord(
        key=_KEY.pack(MARKER_VERSION, kind),
        value=_VALUE.pack(MARKER_VERSION, coordinator_epoch),
        timestamp=now_ms,
    )
    return build_batch(
        [record],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def marker_type(batch: bytes | memoryview, header: BatchHeader) -> MarkerType | None:
    """The type of the control batch ``batch`` (whose header is ``header``), or ``None``
    when it is not a transaction marker we can read (Kafka ignores such control records)."""
    try:
        for record in iter_records(batch, 0, header):
            if record.key is None or len(record.key) < _KEY.size:
                return None
            version, kind = _KEY.unpack_from(record.key, 0)
            if version != MARKER_VERSION or kind not in (MarkerType.ABORT, MarkerType.COMMIT):
                return None
            return MarkerType(kind)
    except RecordsError:
        return None
    return None
