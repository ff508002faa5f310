"""Per-partition offset checkpoint files, in Kafka's text format, and atomic file writes.

::

    0                      ← format version
    3                      ← number of entries
    orders 0 1520          ← topic, partition, offset
    orders 1 977
    audit 0 40

Files in the data directory: ``recovery-point-offset-checkpoint`` (offset up to which
data is known fsynced), ``log-start-offset-checkpoint`` (first visible offset), and later
``cleaner-offset-checkpoint`` and ``index-offset-checkpoint``.

Every file logtrove replaces (checkpoints, topic files, ``meta.json``) goes through
:func:`atomic_write`: a temporary file of its own (``.<name>.<random>.tmp`` in the same
directory, so two writers never share one), written, fsynced, renamed over the target,
and the directory fsynced, so a crash leaves either the old or the new file, never a mix.
Writers of one :class:`CheckpointFile` also take turns (a lock), so the last one to
compute its entries is the last one to write them.

The reader is tolerant: a line it cannot parse (a data directory from a version that
allowed a newline in a topic name) is reported in the log and skipped, so no name can
make a checkpoint unreadable; the writer refuses names outside Kafka's rule, whose
characters could break a line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from logtrove.clock import ascii_int
from logtrove.storage.errors import StorageError
from logtrove.storage.names import is_legal_topic_name

log = logging.getLogger(__name__)

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
CLEANER_OFFSET = "cleaner-offset-checkpoint"
INDEX_OFFSET = "index-offset-checkpoint"
_VERSION = 0
TMP_SUFFIX = ".tmp"


class CheckpointFile:
    """A map (topic, partition) → offset, stored in one file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._write_lock = threading.Lock()

    def read(self) -> dict[tuple[str, int], int]:
        """The stored map; empty when the file does not exist.

        Lines that do not parse are logged and skipped, as is a header that does not; only
        a version number other than 0 (a newer logtrove wrote it) raises
        :class:`StorageError`, so the file is not overwritten with less than it holds.
        """
        try:
            lines = self.path.read_text("utf-8", errors="replace").split("\n")
        except FileNotFoundError:
            return {}
        try:
            version, count = int(lines[0]), int(lines[1])
        except (ValueError, IndexError):
            log.warning("checkpoint file %s has no valid header; its entries are ignored", self.path)
            return {}
        if version != _VERSION:
            raise StorageError(
                f"checkpoint file {self.path} has version {version}; this logtrove reads version {_VERSION}"
            )
        out: dict[tuple[str, int], int] = {}
        for number, line in enumerate(lines[2:], start=3):
            entry = _parse_entry(line)
            if entry is not None:
                out[entry[0]] = entry[1]
            elif line:
                log.warning(
                    "checkpoint file %s: line %d (%r) is not 'topic partition offset'; skipped",
                    self.path,
                    number,
                    line[:300],
                )
        if len(out) != count:
            log.warning(
                "checkpoint file %s announces %d entries and holds %d valid ones", self.path, count, len(out)
            )
        return out

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the file atomically. Raises :class:`StorageError`, writing nothing, if a
        topic name breaks Kafka's rule (it could break the line format)."""
        bad = sorted({topic for topic, _ in offsets if not is_legal_topic_name(topic)})
        if bad:
            raise StorageError(f"checkpoint file {self.path}: refusing illegal topic name(s) {bad!r}")
        lines = [str(_VERSION), str(len(offsets))]
        lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
        with self._write_lock:
            atomic_write(self.path, ("\n".join(lines) + "\n").encode("utf-8"))


def _parse_entry(line: str) -> tuple[tuple[str, int], int] | None:
    parts = line.split(" ")
    if len(parts) != 3 or not is_legal_topic_name(parts[0]):
        return None
    topic, partition, offset = parts[0], ascii_int(parts[1]), ascii_int(parts[2], signed=True)
    if partition is None or offset is None:
        return None
    return (topic, partition), offset


def atomic_write(path: Path, data: bytes, mode: int = 0o644, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` (file mode ``mode``): a temporary file of this
    call's own in the same directory, fsync, rename, fsync of the directory. The
    temporary file is created 0600 and only then given ``mode``, so a secret written
    with ``mode=0o600`` is never readable by others. Concurrent calls for one path never
    disturb each other (the last rename wins); a crash leaves the old or the new file and,
    at worst, a temporary file that :func:`remove_temp_files` clears. Without ``sync`` the
    two fsyncs are skipped: the replacement is atomic for readers and survives a crash of
    the process, not of the machine (the file's page-cache contents are what it holds)."""
    prefix = "." + path.name[:100] + "."
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=TMP_SUFFIX)
    tmp = Path(tmp_name)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if sync:
        fsync_dir(path.parent)


MAX_STATE_FILE_BYTES = 64 << 20


def read_state_file(path: Path, max_bytes: int = MAX_STATE_FILE_BYTES) -> str:
    """The text of a small state file of the data directory (ACLs, broker or group
    configs), refusing one larger than ``max_bytes`` with ValueError before reading it: a
    file somebody else wrote must not take the broker's memory. FileNotFoundError and
    OSError pass through, as do decoding errors (ValueError)."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"it is {size} bytes, more than the {max_bytes} a state file may have")
    return path.read_text("utf-8")


def remove_temp_files(directory: Path, names: tuple[str, ...] | None = None) -> None:
    """Remove what a crash in :func:`atomic_write` can leave for the files ``names`` of
    ``directory``, or for any file when ``names`` is None (a folder only logtrove writes).
    Writers only; nothing else is touched."""
    prefixes = tuple("." + name[:100] + "." for name in names) if names is not None else (".",)
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            if entry.name.startswith(prefixes) and entry.name.endswith(TMP_SUFFIX) and entry.is_file():
                Path(entry.path).unlink(missing_ok=True)


def fsync_dir(path: Path) -> None:
    """fsync a directory so that renames and creations in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_if_exists(path: Path) -> None:
    """fsync the file ``path``; nothing when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def recorded_index_offsets(data_dir: Path) -> dict[tuple[str, int], int]:
    """What ``index-offset-checkpoint`` says: per (topic, partition), the offset below
    which every record is in index blocks. Empty when no indexer has run, or when the file
    is damaged (the indexer rewrites it; queries never depend on it)."""
    try:
        return CheckpointFile(data_dir / INDEX_OFFSET).read()
    except StorageError:
        return {}
