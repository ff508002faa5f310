"""Group commit: fsync before acknowledging, off the event loop, one fsync per file per round.

Appends stay on the event loop (a ``pwritev`` each). A produce request whose
acknowledgement must wait for the disk (its topic has ``flush.messages`` reached, or the
broker runs with ``--durable-acks``) hands the log end offsets it needs to
:meth:`GroupCommit.durable` and awaits. One flusher thread runs rounds back to back while
anyone waits::

    event loop:  append A ─ wait ┐  append B ─ wait ┐ append C ─ wait ┐
    flusher:          round 1: fsync (covers A) ─────┤ round 2: fsync (covers B and C)
                                  release A ◀────────┘           release B, C ◀──────

Each round takes every waiting log, calls :meth:`PartitionLog.flush` (fsync of the
segments written since the recovery point, then the recovery point moves to the log end
seen at the round's start) and releases the waiters whose offsets the new recovery point
covers. Batches that arrive while a round runs wait for the next one, which covers all of
them: the number of fsyncs per log is bounded by the fsync latency, not by the number of
producers, and the loop keeps serving other connections while the disk works.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from logtrove.storage import PartitionLog

log = logging.getLogger("logtrove.broker")

# (offset that must fall below the recovery point, future to release; None for acks=0)
_Waiter = tuple[int, asyncio.Future[None] | None]


class FlushFailedError(OSError):
    """The fsync of a partition failed, or the partition was deleted before it was durable."""


class GroupCommit:
    """The broker's single flusher (see the module docstring). Use from one event loop."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="flusher")
        self._waiting: dict[PartitionLog, list[_Waiter]] = {}
        self._rounds: asyncio.Task[None] | None = None
        self.rounds = 0  # rounds run (each fsyncs every log waited on, once)

    def submit(self, ends: Mapping[PartitionLog, int]) -> None:
        """Have each log in ``ends`` made durable up to (not including) its offset, without
        waiting (acks=0: nobody is told, but the topic's flush policy still holds)."""
        self._enqueue(ends, wait=False)

    async def durable(self, ends: Mapping[PartitionLog, int]) -> dict[PartitionLog, OSError]:
        """Wait until every log in ``ends`` is fsynced below its offset (its recovery point
        reaches it). Returns the logs that could not be made durable, with the reason."""
        futures = self._enqueue(ends, wait=True)
        results = await asyncio.gather(*futures.values(), return_exceptions=True)
        failed: dict[PartitionLog, OSError] = {}
        for partition_log, result in zip(futures, results, strict=True):
            if isinstance(result, OSError):
                failed[partition_log] = result
            elif isinstance(result, BaseException):
                raise result
        return failed

    def _enqueue(
        self, ends: Mapping[PartitionLog, int], *, wait: bool
    ) -> dict[PartitionLog, asyncio.Future[None]]:
        loop = asyncio.get_running_loop()
        futures: dict[PartitionLog, asyncio.Future[None]] = {}
        for partition_log, end in ends.items():
            if partition_log.recovery_point >= end:
                continue
            future = loop.create_future() if wait else None
            self._waiting.setdefault(partition_log, []).append((end, future))
            if future is not None:
                futures[partition_log] = future
        if self._waiting and self._rounds is None:
            self._rounds = loop.create_task(self._run_rounds())
        return futures

    async def _run_rounds(self) -> None:
        loop = asyncio.get_running_loop()
        batch: dict[PartitionLog, list[_Waiter]] = {}
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                errors = await loop.run_in_executor(self._executor, _flush, list(batch))
                self.rounds += 1
                for partition_log, waiters in batch.items():
                    _release(partition_log, waiters, errors.get(partition_log))
        except BaseException as exc:  # cancelled at shutdown, or a bug: no waiter may hang
            error = FlushFailedError(f"the flusher stopped: {exc!r}")
            for partition_log, waiters in [*batch.items(), *self._waiting.items()]:
                _release(partition_log, waiters, error)
            self._waiting = {}
            raise
        finally:
            self._rounds = None

    def close(self) -> None:
        """Stop the flusher thread (after the connections are closed)."""
        if self._rounds is not None:
            self._rounds.cancel()
        self._executor.shutdown(wait=True)


def _flush(logs: list[PartitionLog]) -> dict[PartitionLog, OSError]:
    """In the flusher thread: flush each log; an fsync error fails only its own log."""
    errors: dict[PartitionLog, OSError] = {}
    for partition_log in logs:
        try:
            partition_log.flush()
        except OSError as exc:
            log.error("fsync of %s failed: %s", partition_log.tp, exc)
            errors[partition_log] = exc
    return errors


def _release(partition_log: PartitionLog, waiters: list[_Waiter], error: OSError | None) -> None:
    for end, future in waiters:
        if future is None or future.done():  # acks=0, or the client went away
            continue
        if error is None and partition_log.recovery_point < end:  # the log was deleted meanwhile
            error = FlushFailedError(f"{partition_log.tp} was deleted before its data was flushed")
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
