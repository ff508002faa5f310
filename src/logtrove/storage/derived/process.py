"""The indexer in a child process.

Parsing records costs CPU and, in a thread, holds the GIL the writer's event loop also
needs. :class:`IndexerProcess` runs :class:`~.indexer.Indexer` in a child process
instead: it opens the data directory read-only (the writer keeps the lock),
follows the logs with ``refresh()``, and is the one writer of the derived files. Stopping
it writes the pending blocks; killing it loses nothing (the next indexer resumes from the
files, and queries scan what is not indexed). A child whose parent died stops by itself,
and a new child waits on ``.indexer.lock`` until an old one has let go.

The parent asks a child to stop through a pipe of its own (each child gets a new one),
not a shared ``multiprocessing.Event``: setting such an Event waits for every process
sleeping on it to wake up, and a child killed while it slept (SIGKILL, or SIGTERM sent to
the whole process group by ``timeout``, systemd or a terminal) never does, so the broker
hung at shutdown. The child treats data or end-of-file on its pipe as "stop": the end of
file also comes when the parent dies.

A child that dies without being asked (killed, out of memory, a bug) is restarted by a
watchdog thread of the parent, after a back-off that doubles from
:data:`RESTART_MIN_S` to :data:`RESTART_MAX_S` while children keep dying young, and
returns to the minimum once one has run :data:`HEALTHY_S`; each death is logged with its
exit code or signal.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from logtrove.storage import Storage
from logtrove.storage.derived.indexer import DEFAULT_BLOCK_RECORDS, Indexer

log = logging.getLogger(__name__)

RESTART_MIN_S = 1.0
RESTART_MAX_S = 60.0
HEALTHY_S = 60.0


class IndexerProcess:
    """Start, watch (restart when it dies), and later stop an indexing child process for
    one data directory."""

    def __init__(
        self,
        path: Path | str,
        *,
        block_records: int = DEFAULT_BLOCK_RECORDS,
        idle_s: float = 0.2,
        tail_flush_s: float = 5.0,
        restart_min_s: float = RESTART_MIN_S,
        defer_s: float = 0.0,
    ) -> None:
        self.path = Path(path)
        self.args = (block_records, idle_s, tail_flush_s, defer_s)
        self.restart_min_s = restart_min_s
        self.restarts = 0
        self._ctx = multiprocessing.get_context("spawn")
        self._stop: Connection | None = None  # the write end of the running child's stop pipe
        self._process: multiprocessing.process.BaseProcess | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None

    def start(self) -> None:
        with self._lock:
            if self._process is not None:
                return
            self._stopping.clear()
            self._spawn()
        self._watchdog = threading.Thread(target=self._watch, name="indexer-watchdog", daemon=True)
        self._watchdog.start()

    def _spawn(self) -> None:
        if self._stop is not None:
            self._stop.close()  # a dead child's pipe
        reader, self._stop = self._ctx.Pipe(duplex=False)
        self._process = self._ctx.Process(
            target=run_indexer,
            args=(str(self.path), reader, os.getpid(), *self.args),
            name="logtrove-indexer",
            daemon=True,
        )
        self._process.start()

    def _watch(self) -> None:
        """Restart the child whenever it ends without :meth:`stop` (see the module doc)."""
        backoff = self.restart_min_s
        while not self._stopping.is_set():
            with self._lock:
                process = self._process
            if process is None:
                return
            started = time.monotonic()
            multiprocessing.connection.wait([process.sentinel])
            if self._stopping.is_set():
                return
            process.join(5)  # the sentinel fires as the child ends, before it is reaped
            if time.monotonic() - started >= HEALTHY_S:
                backoff = self.restart_min_s
            code = process.exitcode
            how = (
                f"was killed by signal {-code}"
                if code is not None and code < 0
                else f"exited with code {code}"
            )
            log.warning("the indexer child (pid %s) %s; restarting it in %.1f s", process.pid, how, backoff)
            if self._stopping.wait(backoff):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                self._spawn()
                self.restarts += 1
            backoff = min(2 * backoff, RESTART_MAX_S)

    @property
    def pid(self) -> int | None:
        """The running child's process ID."""
        with self._lock:
            return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the child to write its pending blocks and exit; kill it after ``timeout_s``."""
        with self._lock:
            self._stopping.set()
            process, self._process = self._process, None
            stop, self._stop = self._stop, None
        if process is None:
            return
        if stop is not None:
            with contextlib.suppress(OSError):  # the child is gone: nothing to tell
                stop.send_bytes(b"stop")
            stop.close()
        process.join(timeout_s)
        if process.is_alive():
            process.kill()
            process.join()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout_s)
            self._watchdog = None


INDEXER_LOCK = ".indexer.lock"


class _StopOrOrphaned:
    """Set when the parent asks the child to stop (a message on the stop pipe) or is gone
    (end of file on it; a broker killed with SIGKILL cannot stop its children: they must
    notice by themselves). The parent's pid is checked too, for a parent that dies before
    the child starts."""

    def __init__(self, stop: Connection, parent: int) -> None:
        self._stop = stop
        self._parent = parent  # from the parent: it may be gone before the child starts

    def is_set(self) -> bool:
        return self.wait(0)

    def wait(self, timeout: float | None = None) -> bool:
        return self._stop.poll(timeout) or os.getppid() != self._parent


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
    path: str,
    stop: Connection,
    parent: int,
    block_records: int,
    idle_s: float,
    tail_flush_s: float,
    defer_s: float = 0.0,
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
            storage,
            block_records=block_records,
            idle_s=idle_s,
            tail_flush_s=tail_flush_s,
            sole_indexer=True,
            defer_s=defer_s,
        )
        indexer.run_until(until)
    finally:
        storage.close()
        os.close(lock)
