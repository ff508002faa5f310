"""Creating partitions (a new topic, or more partitions for one) without holding up the
rest of the storage.

Creating a partition is file work (a directory and an empty segment each), done outside
``Storage._lock`` so that a thread creating thousands of them (the broker runs creations
in a worker thread) never holds up readers, appends or the maintenance thread::

    under the lock       wait until no creation of the name runs; check; reserve
    without the lock     mkdir <topic>-<p> ..., open their logs, fsync DATA_DIR
    under the lock       write topics/<topic>.json, list the new logs
    always               release the reservation

While reserved, the name is busy (a second creation or deletion of it waits) and the
partitions count against ``max_partitions`` (the total over all topics). A creation
that fails leaves nothing: the logs it opened are closed and the directories it made
removed. An existing empty partition directory is a crash's leftover and is taken; one
holding files was not made for this topic and is refused.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from logtrove.storage.checkpoint import fsync_dir
from logtrove.storage.errors import PartitionLimitError, TopicExistsError
from logtrove.storage.files import FILE_POOL, is_out_of_fds, out_of_fds_error
from logtrove.storage.log import PartitionLog
from logtrove.storage.names import TopicPartition


class Reservations:
    """The names being created or grown, and how many partitions they add; guarded by
    the lock of ``idle`` (the storage's), which is held by every caller but
    :meth:`release`."""

    def __init__(self, idle: threading.Condition) -> None:
        self._idle = idle  # notified when a creation ends
        self._busy: set[str] = set()
        self.reserved = 0  # partitions of creations in progress

    def wait_idle(self, name: str) -> None:
        """Wait (holding the lock) until no creation of ``name`` is in progress."""
        while name in self._busy:
            self._idle.wait()

    def reserve(self, name: str, count: int, existing: int, limit: int) -> None:
        """Claim ``name`` and ``count`` more partitions besides the ``existing`` ones, or
        raise :class:`PartitionLimitError` if the total would pass ``limit``."""
        total = existing + self.reserved + count
        if total > limit:
            raise PartitionLimitError(
                f"cannot add {count} partition(s) to {name!r}: that makes {total} in all, over the "
                f"limit of {limit} (logtrove serve --max-partitions); delete topics or raise it"
            )
        self._busy.add(name)
        self.reserved += count

    def release(self, name: str, count: int) -> None:
        with self._idle:
            self._busy.discard(name)
            self.reserved -= count
            self._idle.notify_all()


@contextlib.contextmanager
def new_partition_logs(
    data_dir: Path, topic: str, partitions: range, open_log: Callable[[TopicPartition], PartitionLog]
) -> Iterator[dict[TopicPartition, PartitionLog]]:
    """Directories and open logs (``open_log``) for new partitions of ``topic``. If the
    block (or the making) fails, the logs are closed and the directories this call made
    are removed, so a failed creation leaves nothing; running out of descriptors raises
    :class:`~logtrove.storage.errors.TooManyOpenFilesError`."""
    logs: dict[TopicPartition, PartitionLog] = {}
    made: list[Path] = []
    refuse_used_dirs(data_dir, topic, partitions)
    try:
        for p in partitions:
            tp = TopicPartition(topic, p)
            directory = data_dir / str(tp)
            with contextlib.suppress(FileExistsError):
                directory.mkdir()
                made.append(directory)
            logs[tp] = open_log(tp)
        fsync_dir(data_dir)  # the new directories are durable before the topic file names them
        yield logs
    except BaseException as exc:
        out_of_fds = is_out_of_fds(exc)
        for log in logs.values():
            log.abandon()
        if out_of_fds:
            FILE_POOL.close_idle()  # removing the directories needs descriptors too
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)
        if out_of_fds and isinstance(exc, OSError):
            raise out_of_fds_error(exc, f"creating partitions of {topic!r}") from exc
        raise


def refuse_used_dirs(data_dir: Path, topic: str, partitions: range) -> None:
    """An existing empty partition directory is a crash's leftover and is taken; one
    with files in it was not made for this topic (an older version's, or restored by
    hand) and is refused, so that a new topic never takes on old records."""
    for p in partitions:
        d = data_dir / str(TopicPartition(topic, p))
        if d.is_dir() and any(d.iterdir()):
            raise TopicExistsError(
                f"{d} already holds files but no topic owns it; move it out of the data "
                f"directory (or restore topics/{topic}.json) before creating {topic!r}"
            )
