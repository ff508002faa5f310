"""The indexer in a child process.

Parsing records costs CPU and, in a thread, holds the GIL the writer's event loop also
needs. :class:`IndexerProcess` runs :class:`~logtrove.storage.indexer.Indexer` in a child
process instead: it opens the data directory read-only (the writer keeps the lock),
follows the logs with ``refresh()``, and is the one writer of the derived files. Stopping
it writes the pending blocks; killing it loses nothing (the next indexer resumes from the
files, and queries scan what is not indexed). A child whose parent died stops by itself,
and a new child waits on ``.indexer.lock`` until an old one has let go.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import signal
from multiprocessing.synchronize import Event
from pathlib import Path

from logtrove.storage.indexer import DEFAULT_BLOCK_RECORDS, Indexer
from logtrove.storage.store import Storage


class IndexerProcess:
    """Start, and later stop, an indexing child process for one data directory."""

    def __init__(
        self,
        path: Path | str,
        *,
        block_records: int = DEFAULT_BLOCK_RECORDS,
        idle_s: float = 0.2,
        tail_flush_s: float = 5.0,
    ) -> None:
        self.path = Path(path)
        self.args = (block_records, idle_s, tail_flush_s)
        self._ctx = multiprocessing.get_context("spawn")
        self._stop: Event = self._ctx.Event()
        self._process: multiprocessing.process.BaseProcess | None = None

    def start(self) -> None:
        if self._process is not None:
            return
        self._stop.clear()
        self._process = self._ctx.Process(
            target=run_indexer,
            args=(str(self.path), self._stop, os.getpid(), *self.args),
            name="logtrove-indexer",
            daemon=True,
        )
        self._process.start()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the child to write its pending blocks and exit; kill it after ``timeout_s``."""
        if self._process is None:
            return
        self._stop.set()
        self._process.join(timeout_s)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._process = None


INDEXER_LOCK = ".indexer.lock"


class _StopOrOrphaned:
    """Set when the parent asks the child to stop, or when the parent is gone (a broker
    killed with SIGKILL cannot stop its children: they must notice by themselves)."""

    def __init__(self, stop: Event, parent: int) -> None:
        self._stop = stop
        self._parent = parent  # from the parent: it may be gone before the child starts

    def is_set(self) -> bool:
        return self._stop.is_set() or os.getppid() != self._parent

    def wait(self, timeout: float | None = None) -> bool:
        return self._stop.wait(timeout) or self.is_set()


def _lock_indexing(path: Path, stop: _StopOrOrphaned) -> int | None:
    """Take ``.indexer.lock`` (the one-writer rule of derived files): an indexer left
    over from a killed broker may still be finishing a step. ``None`` if told to stop
    while waiting."""
    fd = os.open(path / INDEXER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if stop.wait(0.1):
                os.close(fd)
                return None


def run_indexer(
    path: str, stop: Event, parent: int, block_records: int, idle_s: float, tail_flush_s: float
) -> None:
    """The child's main loop."""
    # Ctrl-C in a terminal reaches the whole process group: the broker stops the child
    # through ``stop`` (after which it writes its pending blocks), not by the signal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    until = _StopOrOrphaned(stop, parent)
    lock = _lock_indexing(Path(path), until)
    if lock is None:
        return
    storage = Storage.open(path, read_only=True)
    try:
        indexer = Indexer(
            storage, block_records=block_records, idle_s=idle_s, tail_flush_s=tail_flush_s, sole_indexer=True
        )
        indexer.run_until(until)
    finally:
        storage.close()
        os.close(lock)
