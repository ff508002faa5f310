"""Flush policy (flush.messages, flush.ms), the checkpoint files, and time-based rolls,
all with a fake clock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage, StorageError
from logtrove.storage.checkpoint import LOG_START_OFFSET, RECOVERY_POINT, CheckpointFile
from logtrove.storage.log import defer_flushes
from logtrove.testing import FakeClock

from .helpers import TOPIC, open_topic

DAY = 86_400_000


def batch(clock: FakeClock, n: int = 1, size: int = 50) -> bytes:
    return build_batch([NewRecord(b"v" * size, None, (), clock.now_ms()) for _ in range(n)])


def test_flush_messages_1_advances_the_recovery_point_on_every_append(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, flush_messages="1", segment_bytes="1024")
    for _ in range(30):
        result = log.append(batch(clock, 3))
        assert log.recovery_point == result.last_offset + 1 == log.log_end_offset
    assert len(log.segments) > 3
    storage.close()


def test_flush_messages_counts_records_not_batches(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, flush_messages="5")
    log.append(batch(clock, 2))
    log.append(batch(clock, 2))
    assert log.recovery_point == 0
    log.append(batch(clock, 1))
    assert log.recovery_point == 5
    log.append(batch(clock, 4))
    assert log.recovery_point == 5
    storage.close()


def test_flush_ms_flushes_only_when_due(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, flush_ms="1000")
    assert not log.flush_if_due()  # nothing to flush
    log.append(batch(clock, 4))
    assert log.recovery_point == 0
    clock.advance(999)
    assert not log.flush_if_due()
    assert log.recovery_point == 0
    clock.advance(1)
    assert log.flush_if_due()
    assert log.recovery_point == 4
    assert not log.flush_if_due()  # nothing new
    log.append(batch(clock, 1))
    clock.advance(500)
    assert not log.flush_if_due()  # the last flush was 500 ms ago
    clock.advance(500)
    assert storage.run_maintenance()["flushed"] == 1
    assert log.recovery_point == 5
    assert CheckpointFile(tmp_path / RECOVERY_POINT).read() == {(TOPIC, 0): 5}
    storage.close()


def test_default_policy_leaves_fsync_to_flush_ms(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock)
    assert (log.config.flush_ms, log.config.flush_messages) == (1000, 2**63 - 1)
    for _ in range(100):
        log.append(batch(clock))
    assert log.recovery_point == 0
    clock.advance(1000)
    assert log.flush_if_due()
    assert log.recovery_point == 100
    storage.close()


def test_appends_inside_defer_flushes_leave_the_fsync_to_the_caller(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, flush_messages="3")
    storage.create_topic("other")
    other = storage.log("other", 0)
    with defer_flushes() as deferred:
        log.append(batch(clock, 2))
        assert not deferred.due
        log.append(batch(clock, 2))  # flush.messages reached: due, but not fsynced here
        other.append(batch(clock, 1))
    assert (log.recovery_point, other.recovery_point) == (0, 0)
    assert deferred.due == {log}
    assert deferred.written == {log: 4, other: 1}
    log.flush()
    assert log.recovery_point == 4
    log.append(batch(clock, 3))  # outside the block an append fsyncs itself, as before
    assert log.recovery_point == 7
    storage.close()


def record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The path of every file or directory fsynced from now on, in order."""
    paths: list[Path] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        paths.append(Path(f"/proc/self/fd/{fd}").readlink())
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return paths


def test_a_flush_after_a_roll_fsyncs_the_partition_directory_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, segment_bytes="1024", index_interval_bytes="100")
    directory = log.directory.resolve()
    log.append(batch(clock))
    fsynced = record_fsyncs(monkeypatch)
    log.flush()  # the first segment's files are new: their directory entries too
    assert fsynced[-1] == directory
    fsynced.clear()
    log.append(batch(clock))
    log.flush()  # no new file since the last flush: no directory fsync
    assert fsynced and directory not in fsynced
    fsynced.clear()
    log.flush()  # nothing unflushed: no fsync at all
    assert not fsynced
    while len(log.segments) == 1:  # the last flush sees the full segment still active
        log.flush()
        log.append(batch(clock))
    log.append(batch(clock))
    sealed, active = log.segments
    fsynced.clear()
    log.flush()
    assert active.log_path.resolve() in fsynced
    assert sealed.offset_index.path.resolve() in fsynced  # sealed: its indexes are final
    assert active.offset_index.path.resolve() not in fsynced  # rebuilt by recovery anyway
    assert fsynced[-1] == directory  # after the files, before the recovery point moves
    assert log.recovery_point == log.log_end_offset
    storage.close()


def test_checkpoints_are_written_and_read_back(tmp_path: Path) -> None:
    clock = FakeClock()
    storage = Storage.open(tmp_path, clock=clock)
    storage.create_topic("a", 2, {"segment.bytes": "1024"})
    storage.create_topic("b")
    for _ in range(40):
        storage.log("a", 1).append(batch(clock, 2))
    storage.log("b", 0).append(batch(clock, 3))
    storage.truncate_before("a", 1, 50)
    storage.flush_all()
    assert CheckpointFile(tmp_path / RECOVERY_POINT).read() == {("a", 0): 0, ("a", 1): 80, ("b", 0): 3}
    starts = CheckpointFile(tmp_path / LOG_START_OFFSET).read()
    assert starts == {("a", 0): 0, ("a", 1): 50, ("b", 0): 0}
    storage.abandon()  # the log start survives a crash: it was checkpointed at once
    with Storage.open(tmp_path, clock=clock) as again:
        assert again.log("a", 1).log_start_offset == 50
        assert next(r.offset for r in again.log("a", 1).records()) == 50
        assert again.log("a", 1).recovery_point == 80


def test_checkpoint_file_round_trips_and_is_replaced_atomically(tmp_path: Path) -> None:
    checkpoint = CheckpointFile(tmp_path / "cp")
    assert checkpoint.read() == {}
    values = {("orders", 0): 5, ("orders", 12): 2**62, ("a.b_c-d", 3): 0}
    checkpoint.write(values)
    assert checkpoint.read() == values
    assert (tmp_path / "cp").read_text().splitlines()[:2] == ["0", "3"]
    checkpoint.write({})
    assert checkpoint.read() == {}
    assert [p.name for p in tmp_path.iterdir()] == ["cp"]


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        ("", {}),
        ("0\n2\nt 0 5\n", {("t", 0): 5}),
        ("0\n1\nt x 5\n", {}),
        ("0\nmany\n", {}),
        ("0\n2\nt\n 0 5\nu 1 6\n", {("u", 1): 6}),
    ],
    ids=repr,
)
def test_malformed_checkpoint_file_is_reported_with_its_name_and_what_parses_is_kept(
    tmp_path: Path, content: str, kept: dict[tuple[str, int], int], caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "cp").write_text(content)
    assert CheckpointFile(tmp_path / "cp").read() == kept
    assert any(str(tmp_path / "cp") in r.getMessage() for r in caplog.records)


def test_checkpoint_file_of_a_newer_version_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "cp").write_text("1\n1\nt 0 5\n")
    with pytest.raises(StorageError) as excinfo:
        CheckpointFile(tmp_path / "cp").read()
    assert "cp" in str(excinfo.value) and "version 1" in str(excinfo.value)


def test_clean_reopen_trusts_the_recovery_point(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, segment_bytes="1024")
    for _ in range(30):
        log.append(batch(clock))
    storage.close()
    assert (tmp_path / ".clean-shutdown").exists()
    storage, log = open_topic(tmp_path, clock)
    assert storage.clean_shutdown
    assert not (tmp_path / ".clean-shutdown").exists()  # a writer is open again
    assert log.recovery_point == log.log_end_offset == 30
    storage.abandon()
    storage, log = open_topic(tmp_path, clock)
    assert not storage.clean_shutdown
    assert log.recovery_point == log.log_end_offset == 30
    storage.close()


# -- time-based rolls -----------------------------------------------------------------------


def test_segment_ms_rolls_once_the_active_segment_is_old_enough(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, segment_ms=str(DAY))
    log.append(batch(clock))
    clock.advance(DAY)
    log.append(batch(clock))
    assert len(log.segments) == 1
    clock.advance(1)
    log.append(batch(clock))
    assert [s.base_offset for s in log.segments] == [0, 2]
    clock.advance(10 * DAY)  # an empty active segment is not rolled by time
    assert len(log.segments) == 2
    storage.close()


def test_segment_ms_counts_from_the_first_record_across_a_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, segment_ms=str(DAY))
    log.append(batch(clock))
    storage.close()
    clock.advance(DAY - 10)  # the broker restarts late in the segment's life
    storage, log = open_topic(tmp_path, clock)
    clock.advance(11)
    log.append(batch(clock))
    assert [s.base_offset for s in log.segments] == [0, 1]
    storage.close()


def test_retention_ms_deletes_old_segments_but_never_the_active_one(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, segment_ms=str(DAY), retention_ms=str(7 * DAY))
    for _ in range(10):
        log.append(batch(clock, 2))
        clock.advance(DAY + 1)
    assert len(log.segments) == 10
    clock.advance(30 * DAY)
    assert log.apply_retention() == [2 * i for i in range(9)]
    assert [s.base_offset for s in log.segments] == [18]
    assert log.log_start_offset == 18
    assert len(list(log.directory.glob("*.log.deleted"))) == 9
    assert log.read(18, 100).first_offset == 18
    clock.advance(60_000)
    assert storage.run_maintenance()["files_purged"] == 9
    assert not list(log.directory.glob("*.deleted"))
    storage.close()


def test_deleted_segment_stays_readable_until_purged(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(tmp_path, clock, segment_bytes="1024")
    for _ in range(40):
        log.append(batch(clock, 2))
    in_flight = log.read(0, 10_000)  # a fetch holding the first segment
    storage.truncate_before(TOPIC, 0, 60)
    assert log.log_start_offset == 60
    assert in_flight.data()[:8] == bytes(8)  # still served after the segment was deleted
    clock.advance(60_000)
    log.purge_deleted()
    storage.close()
