"""Segment ``.log`` files opened lazily, through one bounded pool per process.

Kafka keeps a descriptor open for every segment of every partition and asks for
``ulimit -n`` in the hundreds of thousands. logtrove opens a segment's file only when
it is read or written, the way Kafka opens its indexes lazily, so a data directory with
thousands of partitions and many segments each opens with a few hundred descriptors::

    kept    the segment a partition is writing (its active segment, once appended
            to) keeps its descriptor until it rolls: appends are the hot path
            ── at most ``keep_limit`` of them; past that, writing segments are pooled too
    pooled  every other open file: a least-recently-used list of at most ``capacity``
            idle descriptors; a file in use (``pin``) is never closed under its user

Descriptors are a resource of the process, not of one data directory, so there is one
pool (:data:`FILE_POOL`), sized from the soft ``RLIMIT_NOFILE``: half of the limit for
segment files, the other half left to sockets, index and checkpoint files and the rest
(:meth:`FilePool.fit_to_limit`). Offset and time index files take no lasting
descriptor at all (see :mod:`logtrove.storage.index`).

A pooled file is reopened by path; the path must keep naming the same file (inode)
while the :class:`SegmentFile` lives. The writer's segments follow their renames
(``Segment.rename_suffix``); a reader whose file was replaced meanwhile (a cleaner swap)
gets :class:`FileNotFoundError` instead of another file's bytes.

When the process runs out of descriptors anyway (``EMFILE``), the pool closes its idle
files and tries once more; what still fails raises :class:`TooManyOpenFilesError`,
whose message says what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from logtrove.storage.errors import TooManyOpenFilesError

OUT_OF_FDS = (errno.EMFILE, errno.ENFILE)
FD_ADVICE = "too many open files: raise ulimit -n or lower --max-partitions"
_MAX_POOLED = 256  # idle descriptors worth keeping for old segments' readers
_MIN_POOLED = 8


def is_out_of_fds(exc: BaseException) -> bool:
    """Whether ``exc`` is the process (or the system) running out of descriptors."""
    return isinstance(exc, OSError) and exc.errno in OUT_OF_FDS


def out_of_fds_error(exc: OSError, doing: str) -> TooManyOpenFilesError:
    """The one-line error for ``EMFILE``/``ENFILE`` while ``doing`` something."""
    soft = fd_limit()
    return TooManyOpenFilesError(f"{FD_ADVICE} (ulimit -n is {soft}; failed while {doing}: {exc.strerror})")


def fd_limit() -> int:
    """The soft ``RLIMIT_NOFILE`` of this process (a large number when unlimited)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def raise_fd_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one (as Go programs do at start) and
    return the new soft limit. The hard limit is what an administrator allows; the soft
    default (often 1024) is a relic of ``select()``, which logtrove does not use."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:  # an unlimited hard limit the kernel caps lower fails: keep the soft one
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return fd_limit()


class SegmentFile:
    """One segment's ``.log`` file, opened on demand through a :class:`FilePool`."""

    __slots__ = ("closed", "fd", "flags", "inode", "kept", "path", "pins", "pool")

    def __init__(self, pool: FilePool, path: Path, *, read_only: bool) -> None:
        self.pool = pool
        self.path = path
        self.flags = os.O_RDONLY if read_only else os.O_RDWR | os.O_CREAT
        self.fd: int | None = None
        self.inode: int | None = None  # set at the first opening
        self.pins = 0
        self.kept = False
        self.closed = False

    @contextlib.contextmanager
    def pinned(self) -> Iterator[int]:
        """The open descriptor, never closed by the pool until the block ends."""
        fd = self.pool.pin(self)
        try:
            yield fd
        finally:
            self.pool.unpin(self)

    def pread(self, size: int, position: int) -> bytes:
        fd = self.pool.pin(self)
        try:
            return os.pread(fd, size, position)
        finally:
            self.pool.unpin(self)

    def preadv(self, buf: bytearray | memoryview, position: int) -> int:
        fd = self.pool.pin(self)
        try:
            return os.preadv(fd, [buf], position)
        finally:
            self.pool.unpin(self)

    def pwritev(self, buffers: list[bytes | bytearray | memoryview], position: int) -> int:
        fd = self.pool.pin(self)
        try:
            return os.pwritev(fd, buffers, position)
        finally:
            self.pool.unpin(self)

    def fstat(self) -> os.stat_result:
        with self.pinned() as fd:
            return os.fstat(fd)

    def fsync(self) -> None:
        with self.pinned() as fd:
            os.fsync(fd)

    def ftruncate(self, size: int) -> None:
        with self.pinned() as fd:
            os.ftruncate(fd, size)

    def keep(self) -> None:
        """Keep the descriptor open from now on (the partition writes here)."""
        if not self.kept:
            self.pool.keep(self)

    def unkeep(self) -> None:
        """Back to the pool (the segment stopped being written)."""
        if self.kept:
            self.pool.unkeep(self)

    def close(self) -> None:
        """Close now, or when the last user unpins it."""
        self.pool.close(self)

    def __repr__(self) -> str:
        return f"SegmentFile({self.path.name}, fd={self.fd}, kept={self.kept}, pins={self.pins})"


class FilePool:
    """The open segment files of the process: kept ones plus an LRU of idle ones.

    Thread-safe: every opening, pin and closing happens under one short lock (an
    ``open``/``close`` syscall at most), so a file is never closed while another thread
    reads or writes it.
    """

    def __init__(self, capacity: int, keep_limit: int) -> None:
        self.capacity = capacity
        self.keep_limit = keep_limit
        self._lock = threading.Lock()
        self._lru: OrderedDict[SegmentFile, None] = OrderedDict()
        self._kept = 0

    def fit_to_limit(self, fd_limit_now: int | None = None) -> None:
        """Size the pool for a descriptor limit (default: this process's soft limit):
        half of it for segment files, of which up to 256 idle pooled ones."""
        budget = max((fd_limit_now or fd_limit()) // 2, 2 * _MIN_POOLED)
        self.capacity = max(_MIN_POOLED, min(_MAX_POOLED, budget // 4))
        self.keep_limit = budget - self.capacity

    @property
    def open_count(self) -> int:
        """Descriptors open now: kept plus pooled (pinned ones included)."""
        with self._lock:
            return self._kept + len(self._lru)

    def close_idle(self) -> None:
        """Close every pooled file not in use (to free descriptors after ``EMFILE``)."""
        with self._lock:
            self._evict(0)

    # -- used by SegmentFile ---------------------------------------------------------
    def pin(self, f: SegmentFile) -> int:
        with self._lock:
            if f.fd is None:
                if f.closed:
                    raise OSError(errno.EBADF, f"{f.path.name} is closed")
                f.fd = self._open(f)
                if not f.kept:
                    self._lru[f] = None
            elif not f.kept:
                self._lru.move_to_end(f)
            f.pins += 1
            return f.fd

    def unpin(self, f: SegmentFile) -> None:
        with self._lock:
            f.pins -= 1
            if f.pins == 0 and f.closed:
                self._close_fd(f)
            else:
                self._evict(self.capacity)

    def keep(self, f: SegmentFile) -> None:
        with self._lock:
            if f.kept or f.closed or self._kept >= self.keep_limit:
                return
            if f.fd is None:
                f.fd = self._open(f)
            self._lru.pop(f, None)
            f.kept = True
            self._kept += 1

    def unkeep(self, f: SegmentFile) -> None:
        with self._lock:
            if not f.kept:
                return
            f.kept = False
            self._kept -= 1
            if f.fd is not None:
                self._lru[f] = None
                self._evict(self.capacity)

    def close(self, f: SegmentFile) -> None:
        with self._lock:
            f.closed = True
            if f.kept:
                f.kept = False
                self._kept -= 1
            if f.pins == 0:
                self._close_fd(f)

    # -- under the lock ------------------------------------------------------------------
    def _open(self, f: SegmentFile) -> int:
        try:
            fd = os.open(f.path, f.flags, 0o644)
        except OSError as exc:
            if not is_out_of_fds(exc):
                raise
            self._evict(0)
            try:
                fd = os.open(f.path, f.flags, 0o644)
            except OSError as again:
                if is_out_of_fds(again):
                    raise out_of_fds_error(again, f"opening {f.path}") from again
                raise
        inode = os.fstat(fd).st_ino
        if f.inode is None:
            f.inode = inode
            f.flags &= ~os.O_CREAT  # a reopening must find the file, never make a new one
        elif inode != f.inode:
            os.close(fd)
            raise FileNotFoundError(
                errno.ENOENT, "the segment file was replaced since it was opened", str(f.path)
            )
        return fd

    def _close_fd(self, f: SegmentFile) -> None:
        self._lru.pop(f, None)
        if f.fd is not None:
            fd, f.fd = f.fd, None
            os.close(fd)

    def _evict(self, limit: int) -> None:
        """Close least recently used idle files until at most ``limit`` stay pooled."""
        excess = len(self._lru) - limit
        if excess <= 0:
            return
        victims = []
        for f in self._lru:  # oldest first; usually the very first one is idle
            if f.pins == 0:
                victims.append(f)
                if len(victims) == excess:
                    break
        for f in victims:
            self._close_fd(f)


FILE_POOL = FilePool(capacity=_MAX_POOLED, keep_limit=0)
FILE_POOL.fit_to_limit()
