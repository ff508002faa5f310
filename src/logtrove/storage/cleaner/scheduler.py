"""Scheduling compaction: which partition to clean, when, and what to remember.

The :class:`Cleaner` keeps, per partition of a compacted topic:

* the first dirty offset, in ``cleaner-offset-checkpoint`` (Kafka's format, see
  storage.checkpoint): everything below it has been cleaned at least once;
* the time and summary of the last clean, and an *uncleanable* reason when a clean
  failed, in ``cleaner-state.json`` — readable by read-only openings (``topics describe``).

A partition is eligible when its dirty ratio reaches ``min.cleanable.dirty.ratio``, or
when its oldest dirty record is older than ``max.compaction.lag.ms``. :meth:`run_once`
cleans the dirtiest eligible partition; an error marks only that partition uncleanable
(with the reason) and never stops the cleaner. A background thread
(:meth:`start`) calls :meth:`run_once` every few seconds for the broker.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from logtrove.storage.checkpoint import CLEANER_OFFSET, CheckpointFile, atomic_write
from logtrove.storage.cleaner.clean import CleanStats, Progress, clean_partition, dirty_ratio
from logtrove.storage.cleaner.offset_map import OffsetLookup
from logtrove.storage.errors import CleanCancelledError, SegmentsChangedError
from logtrove.storage.log import PartitionLog
from logtrove.storage.store import Storage
from logtrove.storage.swap import Fault

STATE_FILE = "cleaner-state.json"
DEFAULT_MAP_BUDGET = 64 * 1024 * 1024


@dataclass(frozen=True)
class CleanStatus:
    """What ``topics describe`` shows for one partition of a compacted topic."""

    first_dirty_offset: int
    dirty_ratio: float
    last_clean_ms: int | None
    uncleanable_reason: str | None
    last_stats: dict[str, Any] | None


class Cleaner:
    """Runs cleaning rounds over the compacted topics of one :class:`Storage`."""

    def __init__(self, storage: Storage, *, map_budget_bytes: int = DEFAULT_MAP_BUDGET) -> None:
        self.storage = storage
        self.map_budget_bytes = map_budget_bytes
        self._checkpoint = CheckpointFile(storage.path / CLEANER_OFFSET)
        self._lock = threading.Lock()
        self._first_dirty = self._checkpoint.read()
        self._state: dict[str, dict[str, Any]] = read_state(storage.path)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- status ------------------------------------------------------------------------
    def first_dirty(self, log: PartitionLog) -> int:
        """Where the dirty section starts: the checkpoint, within the log (a follower that
        truncated its log end below the checkpoint appends records that were never cleaned,
        as Kafka's ``maybeTruncateCheckpoint`` has it)."""
        checkpoint = self._first_dirty.get((log.tp.topic, log.tp.partition), 0)
        return max(min(checkpoint, log.log_end_offset), log.log_start_offset)

    def status(self, log: PartitionLog) -> CleanStatus:
        return status_of(self.storage, log)

    # -- cleaning -----------------------------------------------------------------------
    def clean(
        self,
        log: PartitionLog,
        *,
        offset_map: OffsetLookup | None = None,
        progress: Progress | None = None,
        fault: Fault | None = None,
    ) -> CleanStats:
        """One round on ``log``; updates the checkpoint and state. Errors propagate after
        the partition is marked uncleanable (except a concurrent segment change, which
        just ends the round)."""
        key = str(log.tp)
        now = self.storage.clock.now_ms()
        with self._lock:
            try:
                stats = clean_partition(
                    log,
                    first_dirty=self.first_dirty(log),
                    now_ms=now,
                    budget_bytes=self.map_budget_bytes,
                    offset_map=offset_map,
                    progress=progress,
                    fault=fault,
                )
            except (SegmentsChangedError, CleanCancelledError):
                raise
            except Exception as exc:
                self._state[key] = {
                    **self._state.get(key, {}),
                    "uncleanable": f"{type(exc).__name__}: {exc}",
                    "failed_ms": now,
                    "traceback": traceback.format_exc(limit=8),
                }
                self._save_state()
                raise
            self._first_dirty[(log.tp.topic, log.tp.partition)] = stats.first_dirty_after
            self._checkpoint.write(self._first_dirty)
            self._state[key] = {"last_clean_ms": now, "uncleanable": None, "last_stats": asdict(stats)}
            self._save_state()
            return stats

    def clean_until_caught_up(
        self, log: PartitionLog, *, progress: Progress | None = None, max_rounds: int = 10_000
    ) -> list[CleanStats]:
        """Rounds until the dirty section is fully cleaned (many rounds when the map budget
        is small). Used by ``logtrove compact``."""
        rounds: list[CleanStats] = []
        for _ in range(max_rounds):
            stats = self.clean(log, progress=progress)
            rounds.append(stats)
            if stats.first_dirty_after >= stats.first_uncleanable or not stats.made_progress:
                break
        return rounds

    def eligible(self) -> list[tuple[float, PartitionLog]]:
        """Compacted partitions due for cleaning, dirtiest first."""
        now = self.storage.clock.now_ms()
        out = []
        for info in self.storage.topics():
            if not info.config.compact:
                continue
            for p in range(info.partitions):
                log = self.storage.log(info.name, p)
                if self._state.get(str(log.tp), {}).get("uncleanable"):
                    continue
                ratio = dirty_ratio(log, self.first_dirty(log), now)
                if (ratio >= info.config.min_cleanable_dirty_ratio and ratio > 0) or self._overdue(log, now):
                    out.append((ratio, log))
        out.sort(key=lambda item: -item[0])
        return out

    def _overdue(self, log: PartitionLog, now: int) -> bool:
        first_dirty = self.first_dirty(log)
        for seg in log.segments[:-1]:
            if seg.next_offset > first_dirty and seg.first_batch_timestamp is not None:
                return now - seg.first_batch_timestamp > log.config.max_compaction_lag_ms
        return False

    def run_once(self) -> CleanStats | None:
        """Clean the dirtiest eligible partition, if any. Never raises: failures are
        recorded as that partition's uncleanable reason."""
        for _ratio, log in self.eligible():
            if self._stop.is_set():
                return None
            try:
                return self.clean(log, progress=self._check_stop)
            except CleanCancelledError:
                return None
            except SegmentsChangedError:
                continue
            except Exception:  # recorded in the state by clean(); the cleaner goes on
                continue
        return None

    # -- background thread ----------------------------------------------------------------
    def start(self, interval_s: float = 5.0) -> None:
        """Run :meth:`run_once` every ``interval_s`` seconds in a daemon thread."""
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval_s):
                while not self._stop.is_set() and self.run_once() is not None:
                    time.sleep(0)

        self._thread = threading.Thread(target=loop, name="logtrove-cleaner", daemon=True)
        self._thread.start()

    def _check_stop(self, _phase: str, _done: int, _total: int) -> None:
        if self._stop.is_set():
            raise CleanCancelledError("the cleaner is stopping")

    def stop(self) -> None:
        """Stop the thread; a round in progress is abandoned at its next batch (its
        unfinished ``.cleaned`` segment is deleted, the live segments are untouched)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _save_state(self) -> None:
        atomic_write(
            self.storage.path / STATE_FILE, json.dumps(self._state, indent=1, sort_keys=True).encode()
        )


def read_state(path: Path) -> dict[str, dict[str, Any]]:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((path / STATE_FILE).read_text())
        if isinstance(data, dict):
            return data
    return {}


def status_of(storage: Storage, log: PartitionLog) -> CleanStatus:
    """Cleaner status of one partition from the files, for any opening (read-only too)."""
    first_dirty = max(
        CheckpointFile(storage.path / CLEANER_OFFSET).read().get((log.tp.topic, log.tp.partition), 0),
        log.log_start_offset,
    )
    state = read_state(storage.path).get(str(log.tp), {})
    return CleanStatus(
        first_dirty_offset=first_dirty,
        dirty_ratio=round(dirty_ratio(log, first_dirty, storage.clock.now_ms()), 4),
        last_clean_ms=state.get("last_clean_ms"),
        uncleanable_reason=state.get("uncleanable"),
        last_stats=state.get("last_stats"),
    )
