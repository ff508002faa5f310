"""Per-partition offset checkpoint files, in Kafka's text format.

::

    0                      ← format version
    3                      ← number of entries
    orders 0 1520          ← topic, partition, offset
    orders 1 977
    audit 0 40

Files in the data directory: ``recovery-point-offset-checkpoint`` (offset up to which
data is known fsynced), ``log-start-offset-checkpoint`` (first visible offset), and later
``cleaner-offset-checkpoint`` and ``index-offset-checkpoint``. A checkpoint is replaced
atomically (write a temporary file, fsync, rename, fsync the directory), so a crash
leaves either the old or the new file, never a mix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from logtrove.storage.errors import StorageError

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
CLEANER_OFFSET = "cleaner-offset-checkpoint"
INDEX_OFFSET = "index-offset-checkpoint"
_VERSION = 0


class CheckpointFile:
    """A map (topic, partition) → offset, stored in one file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[tuple[str, int], int]:
        """The stored map; empty when the file does not exist.

        Raises :class:`StorageError` naming the line when the file is malformed.
        """
        try:
            lines = self.path.read_text("utf-8").splitlines()
        except FileNotFoundError:
            return {}
        try:
            version, count = int(lines[0]), int(lines[1])
            if version != _VERSION:
                raise ValueError(f"unknown version {version}")
            out: dict[tuple[str, int], int] = {}
            for line in lines[2 : 2 + count]:
                topic, partition, offset = line.rsplit(" ", 2)
                out[(topic, int(partition))] = int(offset)
            if len(out) != count:
                raise ValueError(f"expected {count} entries, found {len(out)}")
            return out
        except (ValueError, IndexError) as exc:
            raise StorageError(f"checkpoint file {self.path} is malformed: {exc}") from exc

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the file atomically."""
        lines = [str(_VERSION), str(len(offsets))]
        lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)
        fsync_dir(self.path.parent)


def fsync_dir(path: Path) -> None:
    """fsync a directory so that renames and creations in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
