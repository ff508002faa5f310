"""The topic store and the data directory: topics with configs, persistence across
reopen, and the single-writer lock (with the holder named) next to read-only openings."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from logtrove.records import NewRecord, build_batch
from logtrove.storage import (
    DataDirError,
    DataDirLockedError,
    InvalidConfigError,
    InvalidTopicError,
    ReadOnlyError,
    Storage,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logtrove.testing import FakeClock

from .helpers import decode_batches


def batch(value: bytes, ts: int = 1000) -> bytes:
    return build_batch([NewRecord(value, None, (), ts)])


def test_created_topics_are_listed_and_described(tmp_path: Path) -> None:
    clock = FakeClock()
    with Storage.open(tmp_path, clock=clock) as storage:
        storage.create_topic("orders", 3, {"retention.ms": "1000", "cleanup.policy": "delete,compact"})
        storage.create_topic("audit")
        assert [t.name for t in storage.topics()] == ["audit", "orders"]
        info = storage.topic("orders")
        assert info.partitions == 3
        assert info.overrides == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}
        assert info.config.retention_ms == 1000
        assert info.config.compact and info.config.delete
        assert info.created_ms == clock.now_ms()
        assert storage.topic("audit").config.as_strings()["segment.bytes"] == "1073741824"
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("orders-")) == [
            "orders-0",
            "orders-1",
            "orders-2",
        ]
        assert storage.log("orders", 2).log_end_offset == 0


def test_topics_configs_and_data_survive_reopen(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        info = storage.create_topic("orders", 2, {"segment.bytes": "2048"})
        storage.log("orders", 1).append(batch(b"hello"))
    with Storage.open(tmp_path) as storage:
        again = storage.topic("orders")
        assert (again.topic_id, again.partitions, dict(again.overrides)) == (
            info.topic_id,
            2,
            {"segment.bytes": "2048"},
        )
        assert storage.log("orders", 1).config.segment_bytes == 2048
        records = [r.value for r in storage.log("orders", 1).records()]
        assert records == [b"hello"]


def test_deleted_topic_is_gone_with_its_files_and_can_be_recreated(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("orders", 2)
        storage.log("orders", 0).append(batch(b"old"))
        storage.delete_topic("orders")
        assert not storage.has_topic("orders")
        assert not (tmp_path / "orders-0").exists()
        assert not (tmp_path / "topics" / "orders.json").exists()
        with pytest.raises(UnknownTopicError):
            storage.topic("orders")
        with pytest.raises(UnknownTopicError):
            storage.delete_topic("orders")
    assert "orders" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert "orders" not in (tmp_path / "log-start-offset-checkpoint").read_text()
    with Storage.open(tmp_path) as storage:
        assert storage.topics() == []
        storage.create_topic("orders", 1)
        assert storage.log("orders", 0).log_end_offset == 0


@pytest.mark.parametrize("name", ["", ".", "..", "a b", "a/b", "ü", "x" * 250, "a:b", "a\nb"], ids=repr)
def test_invalid_topic_names_are_refused(tmp_path: Path, name: str) -> None:
    with Storage.open(tmp_path) as storage:
        with pytest.raises(InvalidTopicError):
            storage.create_topic(name)
        assert storage.topics() == []
        assert list((tmp_path / "topics").iterdir()) == []


def test_longest_legal_topic_name_is_accepted(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("a" * 249)
        storage.create_topic("A.b_c-9")
        assert len(storage.topics()) == 2


def test_duplicate_and_colliding_topics_are_refused(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("a.b")
        with pytest.raises(TopicExistsError):
            storage.create_topic("a.b")
        with pytest.raises(InvalidTopicError):
            storage.create_topic("a_b")


@pytest.mark.parametrize("partitions", [0, -1, 10_001])
def test_bad_partition_counts_are_refused(tmp_path: Path, partitions: int) -> None:
    with Storage.open(tmp_path) as storage, pytest.raises(InvalidTopicError):
        storage.create_topic("t", partitions)


def test_unknown_partition_is_an_error(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 2)
        with pytest.raises(UnknownPartitionError):
            storage.log("t", 2)
        with pytest.raises(UnknownTopicError):
            storage.log("nope", 0)


@pytest.mark.parametrize(
    "configs",
    [
        {"no.such.config": "1"},
        {"retention.ms": "soon"},
        {"retention.ms": "-2"},
        {"segment.bytes": "100"},
        {"cleanup.policy": "forever"},
        {"min.cleanable.dirty.ratio": "1.5"},
        {"flush.messages": "0"},
        {"message.timestamp.type": "Now"},
        {"message.id.header": " id"},
    ],
    ids=lambda c: next(iter(c.items()))[0] + "=" + next(iter(c.values())),
)
def test_unknown_or_bad_config_is_refused(tmp_path: Path, configs: dict[str, str]) -> None:
    with Storage.open(tmp_path) as storage:
        with pytest.raises(InvalidConfigError) as excinfo:
            storage.create_topic("t", 1, configs)
        assert next(iter(configs)) in str(excinfo.value)
        assert not storage.has_topic("t")
        assert not (tmp_path / "t-0").exists()
        storage.create_topic("u")
        with pytest.raises(InvalidConfigError):
            storage.alter_topic_configs("u", configs)
        assert storage.topic("u").overrides == {}


def test_altered_configs_apply_to_the_log_and_persist(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"retention.ms": "1000", "segment.bytes": "4096"})
        info = storage.alter_topic_configs("t", {"retention.bytes": "10"}, ["retention.ms"])
        assert info.overrides == {"segment.bytes": "4096", "retention.bytes": "10"}
        assert storage.log("t", 0).config.retention_bytes == 10
        assert storage.log("t", 0).config.retention_ms == 604_800_000
        with pytest.raises(InvalidConfigError):
            storage.alter_topic_configs("t", delete_configs=["bogus"])
        with pytest.raises(UnknownTopicError):
            storage.alter_topic_configs("nope", {"retention.ms": "5"})
    with Storage.open(tmp_path) as storage:
        assert storage.topic("t").overrides == {"segment.bytes": "4096", "retention.bytes": "10"}
        assert storage.log("t", 0).config.retention_bytes == 10


def test_partitions_can_grow_but_not_shrink(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1)
        storage.create_partitions("t", 3)
        storage.log("t", 2).append(batch(b"x"))
        with pytest.raises(InvalidTopicError):
            storage.create_partitions("t", 2)
    with Storage.open(tmp_path) as storage:
        assert storage.topic("t").partitions == 3
        assert storage.log("t", 2).log_end_offset == 1


# -- the data directory lock ---------------------------------------------------------------

HOLD_LOCK = textwrap.dedent(
    """
    import sys
    from logtrove.storage import Storage
    storage = Storage.open(sys.argv[1], holder="test-writer --serve")
    if not storage.has_topic("t"):
        storage.create_topic("t")
    log = storage.log("t", 0)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "append":
            log.append(bytes.fromhex(sys.stdin.readline().strip()))
            print("appended", flush=True)
        else:
            break
    storage.close()
    """
)


class Writer:
    """A Storage writer in another process, driven through its stdin."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def append(self, data: bytes) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"append\n{data.hex()}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "appended"

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def test_second_writer_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    writer = Writer(tmp_path)
    try:
        with pytest.raises(DataDirLockedError) as excinfo:
            Storage.open(tmp_path)
        message = str(excinfo.value)
        assert f"pid {writer.proc.pid}" in message
        assert "test-writer --serve" in message
        assert str(tmp_path) in message
    finally:
        writer.stop()
    with Storage.open(tmp_path) as storage:  # released on close
        assert storage.has_topic("t")


def test_lock_is_released_when_the_writer_is_killed(tmp_path: Path) -> None:
    writer = Writer(tmp_path)
    writer.proc.kill()
    writer.proc.wait(timeout=30)
    with Storage.open(tmp_path) as storage:
        assert storage.has_topic("t")
        assert not storage.clean_shutdown


def test_read_only_opening_works_beside_a_writer_and_sees_its_appends(tmp_path: Path) -> None:
    writer = Writer(tmp_path)
    try:
        writer.append(batch(b"one"))
        reader = Storage.open(tmp_path, read_only=True)
        log = reader.log("t", 0)
        assert [r.value for r in log.records()] == [b"one"]
        for i in range(30):
            writer.append(batch(b"v%d" % i))
        assert log.log_end_offset == 1
        reader.refresh()
        assert log.log_end_offset == 31
        values = [r.value for _, _, recs in decode_batches(log.read(0, 1 << 20).data()) for r in recs]
        assert values == [b"one"] + [b"v%d" % i for i in range(30)]
        with pytest.raises(ReadOnlyError):
            log.append(batch(b"no"))
        with pytest.raises(ReadOnlyError):
            reader.create_topic("u")
        reader.close()
    finally:
        writer.stop()


def test_read_only_opening_sees_new_topics_and_segments_after_refresh(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"segment.bytes": "1024"})
    reader = Storage.open(tmp_path, read_only=True)
    assert reader.log("t", 0).log_end_offset == 0
    with Storage.open(tmp_path, holder="second") as writer:
        writer.create_topic("u")
        log = writer.log("t", 0)
        for i in range(40):
            log.append(batch(b"%d" % i * 30))
        assert len(log.segments) > 3
        writer.flush_all()
        reader.refresh()
        assert [t.name for t in reader.topics()] == ["t", "u"]
        seen = reader.log("t", 0)
        assert seen.log_end_offset == 40
        assert [r.offset for r in seen.records()] == list(range(40))
        writer.truncate_before("t", 0, 30)
        reader.refresh()
        assert seen.log_start_offset >= 25
        assert [r.offset for r in seen.records()][-1] == 39
    reader.close()


def test_read_only_opening_of_a_plain_directory_fails_clearly(tmp_path: Path) -> None:
    (tmp_path / "some-file").write_text("not data")
    with pytest.raises(DataDirError) as excinfo:
        Storage.open(tmp_path, read_only=True)
    assert "not a logtrove data directory" in str(excinfo.value)
    with pytest.raises(DataDirError):
        Storage.open(tmp_path / "missing", read_only=True)
    assert not (tmp_path / "missing").exists()


def test_meta_file_of_another_format_is_refused(tmp_path: Path) -> None:
    Storage.open(tmp_path).close()
    (tmp_path / "meta.json").write_text('{"cluster_id": "x", "format_version": 99}')
    with pytest.raises(DataDirError) as excinfo:
        Storage.open(tmp_path)
    assert "99" in str(excinfo.value)
    # the failed opening let go of the lock
    (tmp_path / "meta.json").write_text('{"cluster_id": "x", "format_version": 1}')
    Storage.open(tmp_path).close()


def test_cluster_id_is_stable_across_reopen(tmp_path: Path) -> None:
    first = Storage.open(tmp_path)
    cid = first.data_dir.cluster_id
    first.close()
    with Storage.open(tmp_path) as again:
        assert again.data_dir.cluster_id == cid
        assert len(cid) == 22
    assert (tmp_path / ".clean-shutdown").exists()


def test_refreshing_an_idle_reader_does_not_hold_more_files(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        storage.create_topic("t", 1, {"segment.bytes": "1024"})
        for i in range(20):
            storage.log("t", 0).append(batch(b"%d" % i * 100))
    reader = Storage.open(tmp_path, read_only=True)
    reader.log("t", 0)
    fds = len(list(Path("/proc/self/fd").iterdir()))
    for _ in range(200):
        reader.refresh()
    assert len(list(Path("/proc/self/fd").iterdir())) <= fds + 2
    assert reader.log("t", 0).log_end_offset == 20
    reader.close()


def test_reader_never_deletes_the_writers_files(tmp_path: Path) -> None:
    clock = FakeClock()
    storage = Storage.open(tmp_path, clock=clock)
    storage.create_topic("t", 1, {"segment.bytes": "1024"})
    log = storage.log("t", 0)
    reader = Storage.open(tmp_path, read_only=True, clock=clock)
    reader.log("t", 0)
    for i in range(30):
        log.append(batch(b"%d" % i * 60))
        reader.refresh()  # the reader reopens segments as they grow
        clock.advance(30_000)
    reader.refresh()
    reader.close()
    names = {p.name for p in log.directory.iterdir()}
    assert all(f"{s.base_offset:020d}.log" in names for s in log.segments)
    assert [r.offset for r in log.records()] == list(range(30))
    storage.close()
