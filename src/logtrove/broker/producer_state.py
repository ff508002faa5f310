"""Idempotent producers' recent batches, per partition: :class:`ProducerStates`.

The broker remembers the last :data:`RECENT_BATCHES` batches of each (producer,
partition) and

* answers a batch it has already appended (same first and last sequence — a retry whose
  first answer was lost) with the original offsets and no error, without appending again;
* refuses a batch that skips sequence numbers with ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* accepts any sequence from a producer it knows nothing of, or after its epoch changed.

This state is not persisted: after a restart (or once a pair fell out of the
:data:`MAX_TRACKED` most recently used) a producer's first batch with a sequence above 0
makes the broker read the headers of the last :data:`RESCAN_OFFSETS` offsets of that
partition for the producer's recent batches, so a retry of a batch appended just before
a crash is still recognised.

Producer IDs are ``start time in ms × 1024 + n``, unique across restarts without state.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from logtrove.storage import PartitionLog

RECENT_BATCHES = 5
SEQUENCE_WRAP = 2**31
RESCAN_OFFSETS = 10_000  # how far back the log is searched for an unknown producer's batches
MAX_TRACKED = 100_000  # (producer, partition) pairs remembered; the least recently used go first


@dataclass(frozen=True, slots=True)
class Appended:
    first_seq: int
    last_seq: int
    base_offset: int


@dataclass
class _ProducerPartition:
    epoch: int
    recent: deque[Appended]


class ProducerStates:
    """Recent sequence numbers per (producer ID, topic, partition)."""

    def __init__(self, start_ms: int) -> None:
        self._next_id = start_ms * 1024
        self._state: OrderedDict[tuple[int, str, int], _ProducerPartition] = OrderedDict()

    def new_producer_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def check(self, log: PartitionLog, pid: int, epoch: int, first_seq: int, count: int) -> Appended | int:
        """A remembered batch (a duplicate), or an error code (0 = append it)."""
        key = (pid, log.tp.topic, log.tp.partition)
        state = self._state.get(key)
        if state is None and first_seq > 0:
            state = self._rebuild(log, pid, epoch)
        if state is None or state.epoch != epoch or not state.recent:
            return 0
        last_seq = (first_seq + count - 1) % SEQUENCE_WRAP
        for seen in state.recent:
            if seen.first_seq == first_seq and seen.last_seq == last_seq:
                return seen
        expected = (state.recent[-1].last_seq + 1) % SEQUENCE_WRAP
        return 0 if first_seq == expected else int(ErrorCode.out_of_order_sequence_number)

    def _rebuild(self, log: PartitionLog, pid: int, epoch: int) -> _ProducerPartition | None:
        """The producer's last batches among the last :data:`RESCAN_OFFSETS` offsets of the
        log, by batch headers: after a restart a producer retries its in-flight batches,
        and those that were appended before the crash must be recognised."""
        start = max(log.log_start_offset, log.log_end_offset - RESCAN_OFFSETS)
        first = log.read(start, 1).slice if start < log.log_end_offset else None
        if first is None:
            return None
        state = _ProducerPartition(epoch, deque(maxlen=RECENT_BATCHES))
        for seg in log.segments:
            if seg.base_offset < first.segment.base_offset:
                continue
            for _pos, header in seg.batches(first.position if seg is first.segment else 0):
                if header.producer_id == pid and header.producer_epoch == epoch:
                    state.recent.append(
                        Appended(
                            header.base_sequence,
                            (header.base_sequence + header.record_count - 1) % SEQUENCE_WRAP,
                            header.base_offset,
                        )
                    )
        if not state.recent:
            return None
        self._state[(pid, log.tp.topic, log.tp.partition)] = state
        return state

    def active(self, topic: str, partition: int) -> list[tuple[int, int, int]]:
        """``(producer ID, epoch, last sequence)`` of each producer remembered for the
        partition (DescribeProducers; a scan of every remembered pair, an admin call)."""
        return [
            (pid, state.epoch, state.recent[-1].last_seq)
            for (pid, t, p), state in list(self._state.items())
            if t == topic and p == partition and state.recent
        ]

    def record(
        self, pid: int, epoch: int, topic: str, partition: int, first_seq: int, count: int, base: int
    ) -> None:
        key = (pid, topic, partition)
        state = self._state.get(key)
        if state is None or state.epoch != epoch:
            state = self._state[key] = _ProducerPartition(epoch, deque(maxlen=RECENT_BATCHES))
            if len(self._state) > MAX_TRACKED:
                self._state.popitem(last=False)
        self._state.move_to_end(key)
        state.recent.append(Appended(first_seq, (first_seq + count - 1) % SEQUENCE_WRAP, base))


__all__ = ["MAX_TRACKED", "RECENT_BATCHES", "RESCAN_OFFSETS", "Appended", "ProducerStates"]
