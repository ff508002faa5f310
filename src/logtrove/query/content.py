"""Content searches: one scan per partition in a pool of threads, merged as they come.

Each partition's :func:`~logtrove.query.partition.scan_forward` runs in a worker thread
and feeds one bounded queue with its matches, its progress offsets and, last, how it
ended ("done", "budget", "stopped", "error: …"). The caller's thread yields matches in
arrival order, stops at the question's limit, and builds the cursor from each unfinished
partition's progress. The byte budget (and the engine's time budget) is shared by the
partitions and checked before each batch (:class:`~logtrove.query.partition.Budget`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor

from logtrove.query.errors import QueryError
from logtrove.query.model import Completion, ContentQuery, Message, Reason, Stats, encode_cursor
from logtrove.query.partition import Budget, BudgetExhaustedError, scan_forward
from logtrove.records import Record
from logtrove.storage import PartitionLog
from logtrove.storage.txnview import CommittedView


def search_content(
    q: ContentQuery,
    logs: dict[int, PartitionLog],
    views: dict[int, CommittedView | None],
    resume: dict[int, int] | None,
    budget: Budget,
    workers: int,
) -> Generator[Message, None, Completion]:
    """The matches of ``q`` in ``logs`` (``resume``: the cursor's offsets per partition),
    scanned by at most ``workers`` threads; ends with the completion and, unless every
    partition was searched to its end, a cursor. A partition's error is raised as
    :class:`QueryError` once the others have stopped."""
    stats = Stats()
    scans = _ContentWorkers(q, stats, resume, budget, views)
    progress = {p: (resume.get(p, 0) if resume else (q.start_offset or 0)) for p in logs}
    finished: dict[int, str] = {}
    count = 0
    pool = ThreadPoolExecutor(max_workers=min(workers, max(1, len(logs))), thread_name_prefix="query")
    try:
        for p, log in logs.items():
            pool.submit(scans.work, p, log)
        while len(finished) < len(logs):
            if q.limit is not None and count >= q.limit:
                break
            p, item = scans.out.get()
            if isinstance(item, str):
                finished[p] = item
            elif isinstance(item, int):
                progress[p] = max(progress[p], item)
            else:
                count += 1
                progress[p] = max(progress[p], item.offset + 1)
                yield Message.of(q.topic, p, item)
    finally:
        scans.stop.set()  # workers blocked on a full queue notice within 50 ms
        pool.shutdown(wait=False, cancel_futures=True)
    errors = [f"partition {p}: {how}" for p, how in finished.items() if how.startswith("error")]
    if errors:
        raise QueryError("; ".join(errors))
    open_parts = {p: progress[p] for p in logs if finished.get(p) != "done"}
    if q.limit is not None and count >= q.limit and open_parts:
        return Completion(Reason.LIMIT, count, stats, encode_cursor("content", open_parts))
    if open_parts:
        return Completion(Reason.BUDGET, count, stats, encode_cursor("content", open_parts))
    return Completion(Reason.EXHAUSTED, count, stats)


class _ContentWorkers:
    """Per-partition scans of a content query, feeding one queue: matches, progress
    offsets, then a final outcome string ("done", "budget", "stopped", "error: …")."""

    def __init__(
        self,
        q: ContentQuery,
        stats: Stats,
        resume: dict[int, int] | None,
        budget: Budget,
        views: dict[int, CommittedView | None],
    ) -> None:
        self.q = q
        self.views = views
        self.stats = stats
        self.resume = resume
        self.budget = budget
        self.stop = threading.Event()
        self.out: queue.Queue[tuple[int, Record | int | str]] = queue.Queue(maxsize=4096)

    def work(self, p: int, log: PartitionLog) -> None:
        q = self.q
        start = self.resume.get(p, 0) if self.resume else (q.start_offset or 0)
        outcome = "done"
        try:
            for item in scan_forward(
                log,
                self.stats,
                from_offset=start,
                to_offset=q.end_offset,
                start_ms=q.start_ms,
                end_ms=q.end_ms,
                predicate=q.predicate,
                budget=self.budget,
                stop=self.stop,
                view=self.views[p],
            ):
                if not self.put((p, item)):
                    outcome = "stopped"
                    break
        except BudgetExhaustedError:
            outcome = "budget"
        except Exception as exc:  # reported to the caller by the consuming thread
            outcome = f"error: {exc}"
        self.put((p, outcome))

    def put(self, entry: tuple[int, Record | int | str]) -> bool:
        """Queue an item unless the query was stopped (waits while the queue is full)."""
        while not self.stop.is_set():
            try:
                self.out.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False
