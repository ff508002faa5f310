"""Symbolic links out of the data directory: a partition directory that is one, or holds
one, is not opened, so recovery, retention and topic deletion never truncate or remove
the files behind it; the other partitions open and serve as usual."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.storage.data_dirs import batch

from logtrove.storage import Storage, UnsafePartitionError
from logtrove.storage.segmentnames import segment_file_name

SEGMENT = segment_file_name(0, ".log")
OUTSIDE_BYTES = b"34 bytes of somebody else's file.\n"


def crashed_data_dir(data: Path) -> None:
    """Topics ``orders`` and ``audit`` with a record each, left as a crash leaves them
    (no clean-shutdown marker, no checkpoints): the next opening recovers their segments."""
    storage = Storage.open(data)
    for topic in ("orders", "audit"):
        storage.create_topic(topic, 1)
        storage.log(topic, 0).append(batch(topic.encode()))
    storage.abandon()


def test_an_unclean_start_does_not_truncate_a_segment_linked_outside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data, outside = tmp_path / "data", tmp_path / "elsewhere.txt"
    crashed_data_dir(data)
    outside.write_bytes(OUTSIDE_BYTES)
    segment = data / "orders-0" / SEGMENT
    segment.unlink()
    segment.symlink_to(outside)
    with Storage.open(data) as storage:
        assert outside.read_bytes() == OUTSIDE_BYTES and len(OUTSIDE_BYTES) == 34
        with pytest.raises(UnsafePartitionError) as refused:
            storage.log("orders", 0)
        message = str(refused.value)
        assert str(data / "orders-0") in message and SEGMENT in message and str(outside) in message
        assert "remove the link" in message
        assert [r.value for r in storage.log("audit", 0).records()] == [b"audit"]
        storage.log("audit", 0).append(batch(b"more"))
        assert [lg.tp.topic for lg in storage.logs()] == ["audit"]
    assert outside.read_bytes() == OUTSIDE_BYTES
    assert any("symbolic link" in r.getMessage() for r in caplog.records)


def test_deleting_a_topic_whose_partition_dir_is_a_link_spares_the_files_there(tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    with Storage.open(data) as storage:
        storage.create_topic("orders", 2)
        storage.log("orders", 0).append(batch(b"o"))
    (data / "orders-0").rename(elsewhere)
    (data / "orders-0").symlink_to(elsewhere, target_is_directory=True)
    kept = sorted(p.name for p in elsewhere.iterdir())
    assert SEGMENT in kept
    with Storage.open(data) as storage:
        with pytest.raises(UnsafePartitionError, match="is a symbolic link"):
            storage.log("orders", 0)
        assert storage.log("orders", 1).log_end_offset == 0
        storage.delete_topic("orders")
        assert not storage.has_topic("orders")
    assert sorted(p.name for p in elsewhere.iterdir()) == kept
    assert (elsewhere / SEGMENT).stat().st_size > 0


def test_a_reader_refuses_the_linked_partition_too(tmp_path: Path) -> None:
    data, outside = tmp_path / "data", tmp_path / "elsewhere"
    crashed_data_dir(data)
    Storage.open(data).close()
    outside.mkdir()
    (data / "orders-0" / "stray").symlink_to(outside, target_is_directory=True)
    with Storage.open(data, read_only=True) as reader:
        with pytest.raises(UnsafePartitionError, match="holds a symbolic link, stray"):
            reader.log("orders", 0)
        assert [r.value for r in reader.log("audit", 0).records()] == [b"audit"]
