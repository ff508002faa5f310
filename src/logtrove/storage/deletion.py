"""Topic deletion on disk: partition directories marked for deletion, and only those
removed.

::

    DATA_DIR/
      topics/orders.json                          1. rewritten with "deleting": true
      orders-0/   →  orders-0.<uuid hex>-delete/  2. each partition directory renamed
      orders-1/   →  orders-1.<uuid hex>-delete/     (Kafka's marked form)
                                                  3. the topic file removed
                                                  4. the marked directories removed

A crash at any point leaves either the whole topic or directories marked for deletion:
after step 1 the topic is gone for every reader, and the next writer opening finishes an
interrupted deletion and removes every marked directory left over. The topic part of a
marked name is cut so that the name fits 255 bytes.

Only marked directories are ever removed (:func:`remove_marked` refuses any other
path): a folder logtrove did not create and mark (a user's ``photos-2023/``) is never
touched, whatever its name.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from pathlib import Path

from logtrove.clock import ascii_int
from logtrove.storage.checkpoint import fsync_dir

log = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"
_MARKED_DIR = re.compile(r".+-[0-9]+\.[0-9a-f]{32}" + DELETE_DIR_SUFFIX, re.DOTALL)


def marked_dir_name(topic: str, partition: int) -> str:
    """Kafka's name for a partition directory being deleted:
    ``<topic>-<partition>.<uuid hex>-delete``, the topic cut so that it fits 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    prefix = topic
    while len(os.fsencode(prefix + suffix)) > 255:
        prefix = prefix[:-1]
    return prefix + suffix


def is_marked_dir_name(name: str) -> bool:
    """True for the names :func:`marked_dir_name` gives, the only directories logtrove removes."""
    return _MARKED_DIR.fullmatch(name) is not None


def mark_partition_dirs(data_dir: Path, topic: str, partitions: int | None) -> list[Path]:
    """Rename the partition directories of ``topic`` to their marked form (step 2); with
    ``partitions`` None (a topic file that does not say), every ``<topic>-<digits>``
    directory. Only real directories directly in ``data_dir`` are renamed."""
    wanted = None if partitions is None else {f"{topic}-{p}" for p in range(partitions)}
    marked: list[Path] = []
    with os.scandir(data_dir) as entries:
        for entry in entries:
            head, _, tail = entry.name.rpartition("-")
            if wanted is not None and entry.name not in wanted:
                continue
            if wanted is None and not (head == topic and ascii_int(tail) is not None):
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            target = data_dir / marked_dir_name(topic, int(tail))
            Path(entry.path).rename(target)
            marked.append(target)
    if marked:
        fsync_dir(data_dir)
    return marked


def unlink_topic(marked: list[Path], topic_file: Path) -> None:
    """Remove a topic file whose partition directories are marked, then those (steps 3
    and 4)."""
    topic_file.unlink(missing_ok=True)
    fsync_dir(topic_file.parent)
    remove_marked(marked)


def marked_dirs(data_dir: Path) -> list[Path]:
    """The marked directories directly in ``data_dir`` (leftovers of a crash)."""
    with os.scandir(data_dir) as entries:
        return [
            Path(e.path) for e in entries if e.is_dir(follow_symlinks=False) and is_marked_dir_name(e.name)
        ]


def remove_marked(paths: list[Path]) -> None:
    """Remove partition directories marked for deletion (and nothing else)."""
    for path in paths:
        if not is_marked_dir_name(path.name):
            raise ValueError(f"{path} is not marked for deletion")
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            log.warning("could not remove %s entirely; the next writer opening retries", path)
