"""The data directory: its identity file and the single-writer lock.

::

    DATA_DIR/
      meta.json          {"cluster_id": "...", "broker_id": 0, "format_version": 1}
      .lock              flock()ed by the one writer; holds JSON naming it (pid, command, since)
      .clean-shutdown    present only between a clean close and the next writer opening

A directory is logtrove's only when it holds ``meta.json``: a writer initialises an empty
(or missing) directory, and refuses a non-empty one without it, so that ``--data`` pointed
at the wrong folder never changes, let alone deletes, anything in it.

One process writes (the broker, or a CLI command when no broker runs); any number may
read. The lock is an advisory ``flock`` so it disappears with its process, even on
SIGKILL; the JSON in the file is only there to name the holder in error messages.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from logtrove.storage.checkpoint import TMP_SUFFIX, atomic_write, fsync_dir, remove_temp_files
from logtrove.storage.errors import DataDirError, DataDirLockedError

FORMAT_VERSION = 1
META_FILE = "meta.json"
LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"


def new_cluster_id() -> str:
    """A Kafka-style cluster id: a UUID in URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class DataDir:
    """An opened data directory; a writer holds its lock until :meth:`close`."""

    def __init__(self, path: Path, *, read_only: bool, meta: dict[str, Any], lock_fd: int | None) -> None:
        self.path = path
        self.read_only = read_only
        self.meta = meta
        self._lock_fd = lock_fd

    @property
    def cluster_id(self) -> str:
        return str(self.meta["cluster_id"])

    @property
    def broker_id(self) -> int:
        return int(self.meta.get("broker_id", 0))

    @classmethod
    def open(cls, path: Path | str, *, read_only: bool = False, holder: str | None = None) -> DataDir:
        """Open ``path``; a writer creates it if needed and takes the lock.

        Raises :class:`DataDirLockedError` (naming the holder) when another writer holds
        it, and :class:`DataDirError` when a read-only opening finds no data directory or a
        writer finds a non-empty directory without ``meta.json``.
        """
        path = Path(path)
        if read_only:
            if not (path / META_FILE).is_file():
                raise DataDirError(
                    f"{path} is not a logtrove data directory (no {META_FILE}); "
                    "create a topic there first, e.g. `logtrove topics create NAME --data DIR`"
                )
            return cls(path, read_only=True, meta=_read_meta(path), lock_fd=None)
        _check_ours_or_empty(path)  # before the lock file: a refused folder stays untouched
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataDirError(f"cannot create data directory {path}: {exc.strerror}") from exc
        lock_fd = _acquire_lock(path, holder or _default_holder())
        try:
            if (path / META_FILE).exists():
                meta = _read_meta(path)
            else:
                _check_ours_or_empty(path)  # again, now that no other writer can be at it
                meta = _write_new_meta(path)
            remove_temp_files(path, (META_FILE,))
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(path, read_only=False, meta=meta, lock_fd=lock_fd)

    def holder(self) -> dict[str, Any] | None:
        """Who holds the writer lock, as written in ``.lock``, or ``None``."""
        return read_holder(self.path)

    # -- clean shutdown marker --------------------------------------------------------
    def take_clean_shutdown_marker(self) -> bool:
        """True if the last writer closed cleanly; removes the marker (a writer is now open)."""
        marker = self.path / CLEAN_SHUTDOWN_FILE
        existed = marker.exists()
        if existed and not self.read_only:
            marker.unlink()
            fsync_dir(self.path)
        return existed

    def write_clean_shutdown_marker(self) -> None:
        (self.path / CLEAN_SHUTDOWN_FILE).write_text(str(int(time.time() * 1000)))
        fsync_dir(self.path)

    def close(self) -> None:
        """Release the writer lock."""
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._lock_fd, 0)
            os.close(self._lock_fd)
            self._lock_fd = None


def _default_holder() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200] or "python"


def _acquire_lock(path: Path, holder: str) -> int:
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        info = read_holder(path) or {}
        who = f"pid {info.get('pid', '?')}"
        if info.get("command"):
            who += f" ({info['command']}"
            if info.get("since"):
                who += f", since {info['since']}"
            who += ")"
        if info.get("host"):
            who += f" on {info['host']}"
        raise DataDirLockedError(
            f"data directory {path} is locked by another writer: {who}. "
            "Stop that process, point this command at the running broker with --bootstrap, "
            "or use a read-only command (query, lag, dump-log).",
            holder=who,
        ) from None
    info = {
        "pid": os.getpid(),
        "command": holder,
        "host": socket.gethostname(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(info).encode(), 0)
    return fd


def read_holder(path: Path) -> dict[str, Any] | None:
    """The holder info in ``path/.lock``, or ``None`` when absent or unreadable."""
    try:
        raw = (path / LOCK_FILE).read_text("utf-8")
        info = json.loads(raw) if raw.strip() else None
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _check_ours_or_empty(path: Path) -> None:
    """Refuse a directory that has files but no ``meta.json``: it is not logtrove's."""
    if (path / META_FILE).exists() or not path.is_dir():
        return
    try:
        foreign = [p.name for p in path.iterdir() if not _ours_before_meta(p.name)]
    except OSError as exc:
        raise DataDirError(f"cannot read data directory {path}: {exc.strerror}") from exc
    if foreign:
        raise DataDirError(
            f"{path} is not empty and has no {META_FILE}, so it is not a logtrove data directory "
            f"(it holds e.g. {sorted(foreign)[0]!r}); nothing was written there. "
            "Use --data with an empty or new directory, or an existing logtrove data directory."
        )


def _ours_before_meta(name: str) -> bool:
    """What a writer leaves if it dies before ``meta.json`` is in place."""
    return name == LOCK_FILE or (name.startswith("." + META_FILE + ".") and name.endswith(TMP_SUFFIX))


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / META_FILE).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise DataDirError(f"{path / META_FILE} is unreadable: {exc}") from exc
    if not isinstance(meta, dict) or "cluster_id" not in meta:
        raise DataDirError(f"{path / META_FILE} is not a logtrove meta file")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise DataDirError(
            f"{path} has data format version {version}; this logtrove reads version {FORMAT_VERSION}"
        )
    return meta


def _write_new_meta(path: Path) -> dict[str, Any]:
    meta = {"cluster_id": new_cluster_id(), "broker_id": 0, "format_version": FORMAT_VERSION}
    atomic_write(path / META_FILE, (json.dumps(meta, indent=2) + "\n").encode("utf-8"))
    return meta
