"""The two checkpoints of the partition logs of a data directory: the recovery point and
the log start offset of every partition (files in :mod:`logtrove.storage.checkpoint`'s
format).

::

    recovery-point-offset-checkpoint   (topic, partition) → offset below which the
                                       partition's data is fsynced (PartitionLog.flush)
    log-start-offset-checkpoint        (topic, partition) → first visible offset
                                       (retention, DeleteRecords, a follower's move)

Opening N partitions reads each file once, not once per partition: :meth:`initial`
reads both the first time it is asked and answers from memory after. A writer needs
them only for the partitions that exist when it opens (it alone writes the files
afterwards, and opens its new partitions at offset 0); a reader reads the log starts
again at each refresh. :meth:`write` writes a file only when its entries changed, and
writers take turns, so the last to look at the logs is the last to write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from logtrove.storage.checkpoint import LOG_START_OFFSET, RECOVERY_POINT, CheckpointFile
from logtrove.storage.log import PartitionLog
from logtrove.storage.names import TopicPartition

Offsets = dict[tuple[str, int], int]


class LogCheckpoints:
    """The recovery points and log start offsets of one data directory (module doc)."""

    def __init__(self, data_dir: Path) -> None:
        self._recovery_points = CheckpointFile(data_dir / RECOVERY_POINT)
        self._log_starts = CheckpointFile(data_dir / LOG_START_OFFSET)
        self._read: tuple[Offsets, Offsets] | None = None
        self._written: dict[str, Offsets] = {}
        self._write_lock = threading.Lock()  # one checkpoint writer at a time

    def initial(self) -> tuple[Offsets, Offsets]:
        """(recovery points, log start offsets) as the files held them when first asked
        (or at the last :meth:`reread_log_starts`)."""
        if self._read is None:
            self._read = (self._recovery_points.read(), self._log_starts.read())
        return self._read

    def reread_log_starts(self) -> Offsets:
        """The log start offsets the file holds now (a reader's refresh); later
        :meth:`initial` answers give them."""
        starts = self._log_starts.read()
        self._read = (self._read[0] if self._read else {}, starts)
        return starts

    def write(self, snapshot: Callable[[], Iterable[tuple[TopicPartition, PartitionLog]]]) -> None:
        """Write the files whose entries changed, for the logs ``snapshot`` lists
        (called with the writers' turn taken)."""
        with self._write_lock:
            logs = list(snapshot())
            for name, checkpoint, attr in (
                (RECOVERY_POINT, self._recovery_points, "recovery_point"),
                (LOG_START_OFFSET, self._log_starts, "log_start_offset"),
            ):
                values = {(tp.topic, tp.partition): int(getattr(plog, attr)) for tp, plog in logs}
                if self._written.get(name) != values:
                    checkpoint.write(values)
                    self._written[name] = values
