"""Many partitions (issue 13, finding 6): opening reads each checkpoint file once, old
segments hold no descriptor, and the total partition cap refuses creations past it."""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from logtrove.records import NewRecord, build_batch
from logtrove.storage import PartitionLimitError, Storage, TopicExistsError
from logtrove.storage.checkpoint import LOG_START_OFFSET, RECOVERY_POINT

_CHECKPOINT_NAMES = {RECOVERY_POINT, LOG_START_OFFSET}
_opened: Counter[str] = Counter()
_counting = threading.Event()


def _count_checkpoint_opens(event: str, args: tuple[Any, ...]) -> None:
    """A real file-access counter: Python's audit event for every ``open()``/``os.open``
    of a checkpoint file for reading (writes open the ``.tmp`` file)."""
    if not _counting.is_set() or event != "open" or not args:
        return
    name = Path(os.fsdecode(args[0])).name if isinstance(args[0], str | bytes | Path) else ""
    if name in _CHECKPOINT_NAMES:
        _opened[name] += 1


sys.addaudithook(_count_checkpoint_opens)  # audit hooks cannot be removed: it stays inert


def _data_dir(path: Path, partitions: int) -> Path:
    """A data directory with ``partitions`` partitions (topics of 1,000) and checkpoints."""
    with Storage.open(path) as storage:
        for i in range(partitions // 1000):
            storage.create_topic(f"topic-{i}", 1000)
    return path


def _checkpoint_reads_opening(path: Path) -> Counter[str]:
    _opened.clear()
    _counting.set()
    try:
        with Storage.open(path) as storage:
            assert sum(info.partitions for info in storage.topics()) > 0
    finally:
        _counting.clear()
    return Counter(_opened)


def test_opening_reads_each_checkpoint_file_once_whatever_the_partition_count(tmp_path: Path) -> None:
    small = _checkpoint_reads_opening(_data_dir(tmp_path / "n", 1000))
    large = _checkpoint_reads_opening(_data_dir(tmp_path / "4n", 4000))
    assert small == large == {RECOVERY_POINT: 1, LOG_START_OFFSET: 1}


def _open_fds() -> int:
    return sum(1 for _ in Path("/proc/self/fd").iterdir())


def test_thousands_of_segments_open_with_far_fewer_descriptors(tmp_path: Path) -> None:
    partitions, segments_each = 1000, 3
    value = b"v" * 700  # two such batches pass segment.bytes=1024: every append rolls
    with Storage.open(tmp_path) as storage:
        storage.create_topic("wide", partitions, {"segment.bytes": "1024"})
        for p in range(partitions):
            log = storage.log("wide", p)
            for i in range(segments_each):
                log.append(build_batch([NewRecord(value, key=b"%d" % i)]))
        assert len(storage.log("wide", 7).segments) == segments_each
    before = _open_fds()
    with Storage.open(tmp_path) as storage:
        opened = _open_fds() - before
        total = sum(len(storage.log("wide", p).segments) for p in range(partitions))
        assert total == partitions * segments_each
        assert opened < total // 10, f"{opened} descriptors for {total} segments"
        for p in range(partitions):  # every old segment read: the pool stays bounded
            first = storage.log("wide", p).read(0, 1 << 20)
            assert first.slice is not None and first.slice.segment is storage.log("wide", p).segments[0]
            assert value in first.data()
        assert _open_fds() - before < total // 10


def test_the_total_partition_cap_refuses_creations_past_it(tmp_path: Path) -> None:
    with Storage.open(tmp_path, max_partitions=10) as storage:
        storage.create_topic("a", 6)
        with pytest.raises(
            PartitionLimitError, match=r"makes 11 in all, over the limit of 10 .*--max-partitions"
        ):
            storage.create_topic("b", 5)
        with pytest.raises(PartitionLimitError, match="limit of 10"):
            storage.create_partitions("a", 11)
        storage.create_partitions("a", 8)
        storage.create_topic("b", 2)
        assert sorted((t.name, t.partitions) for t in storage.topics()) == [("a", 8), ("b", 2)]
        assert not (tmp_path / "c-0").exists()
        with pytest.raises(TopicExistsError):
            storage.create_topic("b", 1)
    with Storage.open(tmp_path, max_partitions=5) as storage:  # already over a lower cap: opens
        assert sum(t.partitions for t in storage.topics()) == 10
        with pytest.raises(PartitionLimitError):
            storage.create_topic("c", 1)
        storage.delete_topic("a")
        storage.create_topic("c", 1)
        assert storage.log("c", 0).append(build_batch([NewRecord(b"x")])).base_offset == 0
