"""What a cleaning round does with transactions, as Kafka's LogCleaner does.

* **Open transactions are not cleaned**: the round ends at the last stable offset at the
  latest (:func:`uncleanable_from`), so no record at or past the first open transaction
  is read for the map or copied anew.
* **Aborted data is removed**: a transactional data batch of an aborted transaction (the
  committed view of :mod:`logtrove.storage.txnview`, from the markers) is dropped whole,
  and it is not put in the offset map, so it never shadows an older committed record of
  its key.
* **Markers stay while they are needed** (Kafka's ``CleanedTransactionMetadata``): the
  round walks the log from its start, so for each marker of producer ``P`` it knows
  whether any data batch of the transaction it ends was met in this round (``P``'s
  batches since its previous marker). Such a marker is kept as it is (data of its
  transaction remains, or is being removed now and a reader may still be in it). A marker
  with no data left gets a delete horizon ``now + delete.retention.ms`` (KIP-534: batch
  attribute bit 6, the horizon in the base timestamp, as tombstones get) and is dropped
  by the first round after it.
* **The ``.txnindex``** of a cleaned segment keeps the entries of the ABORT markers that
  the round kept (:meth:`TxnCleaning.kept_entries`); an entry without its marker would
  name a transaction the log no longer shows.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from logtrove.records import BatchHeader, iter_records
from logtrove.records.builder import build_batch
from logtrove.storage.log import PartitionLog
from logtrove.storage.segment import Segment
from logtrove.storage.txnindex import AbortedTxn, read_txn_index
from logtrove.storage.txnview import CommittedView, committed_view


def uncleanable_from(log: PartitionLog) -> int:
    """The last stable offset: the first offset of the earliest open transaction (the log
    end when none is open)."""
    return committed_view(log).last_stable_offset


class Verdict(enum.Enum):
    KEEP = "keep"
    DROP = "drop"
    STAMP = "stamp"  # keep, with a delete horizon from now on


@dataclass
class TxnCleaning:
    """The transaction bookkeeping of one round, fed every batch below the round's end in
    offset order from the log start (see the module docstring)."""

    view: CommittedView
    now_ms: int
    horizon_ms: int  # now + delete.retention.ms
    _seen: set[int] = field(default_factory=set)  # producers with data met since their last marker
    _kept_aborts: set[int] = field(default_factory=set)  # offsets of ABORT markers kept
    markers_removed: int = 0
    aborted_batches_removed: int = 0

    @classmethod
    def of(cls, log: PartitionLog, now_ms: int) -> TxnCleaning:
        return cls(committed_view(log), now_ms, now_ms + log.config.delete_retention_ms)

    def drops_data(self, header: BatchHeader) -> bool:
        """Whether a data batch is one of an aborted transaction (and notes a producer's
        data met either way)."""
        if not header.is_transactional or header.producer_id < 0:
            return False
        self._seen.add(header.producer_id)
        return self.view.aborted(header.base_offset)

    def skips_in_map(self, header: BatchHeader) -> bool:
        """Whether the map pass leaves a batch out: a control batch or aborted data."""
        return header.is_control or (header.is_transactional and self.view.aborted(header.base_offset))

    def marker(self, header: BatchHeader) -> Verdict:
        """The fate of a control batch."""
        if header.producer_id < 0:
            return Verdict.KEEP
        needed = header.producer_id in self._seen
        self._seen.discard(header.producer_id)
        if needed:
            verdict = Verdict.KEEP
        elif header.delete_horizon_ms is None:
            verdict = Verdict.STAMP
        elif header.delete_horizon_ms <= self.now_ms:
            self.markers_removed += 1
            return Verdict.DROP
        else:
            verdict = Verdict.KEEP
        self._kept_aborts.add(header.base_offset)
        return verdict

    def stamped(self, header: BatchHeader, data: bytes | memoryview) -> bytes:
        """The marker batch with the delete horizon set (same offsets, producer fields and
        record; its record's timestamp kept through the delta)."""
        records = list(iter_records(bytes(data), 0, header))
        return build_batch(
            records,
            base_offset=header.base_offset,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            transactional=header.is_transactional,
            control=True,
            offset_deltas=[r.offset - header.base_offset for r in records],
            last_offset_delta=header.last_offset_delta,
            delete_horizon=self.horizon_ms,
        )

    def kept_entries(self, group: list[Segment]) -> list[AbortedTxn] | None:
        """The ``.txnindex`` entries of ``group`` whose ABORT marker the round kept, or
        ``None`` when a source index is missing or damaged (the cleaned segment then has
        none, and the next load rebuilds it from the log)."""
        out: list[AbortedTxn] = []
        for seg in group:
            entries = read_txn_index(seg)
            if entries is None:
                return None
            out.extend(e for e in entries if e.last_offset in self._kept_aborts)
        return out
