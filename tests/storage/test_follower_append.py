"""The follower append of a mirror (``PartitionLog.append_replicated``) and followed topics:
the leader's batches land byte for byte at their own offsets, hostile ones are refused
whole, and clients cannot write to a followed topic."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.storage.helpers import files_of

from logtrove.records import CorruptBatchError, CrcMismatchError, NewRecord, RecordsError, build_batch
from logtrove.storage import FollowedTopicError, Storage
from logtrove.testing import FakeClock

T = "m"


def _records(n: int, prefix: str = "k") -> list[NewRecord]:
    return [NewRecord(key=f"{prefix}{i}".encode(), value=b"v%d" % i, timestamp=1_000 + i) for i in range(n)]


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    s = Storage.open(tmp_path / "data", clock=FakeClock())
    s.create_topic(T, 1, {"cleanup.policy": "compact"}, followed_from="leader:9092")
    return s


def test_batches_keep_their_offsets_gaps_and_bytes(storage: Storage) -> None:
    plain = build_batch(_records(3), base_offset=0)
    compacted = build_batch(_records(2, "c"), base_offset=10, offset_deltas=[1, 4], last_offset_delta=6)
    control = build_batch(
        [NewRecord(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")], base_offset=17, control=True
    )
    log = storage.log(T, 0)
    log.append_replicated(plain + compacted)
    log.append_replicated(control)
    assert log.log_end_offset == 18
    assert [o.offset for o in log.records()] == [0, 1, 2, 11, 14, 17]
    storage.close()
    (segment,) = [b for n, b in files_of(storage.path / f"{T}-0").items() if n.endswith(".log")]
    assert segment == plain + compacted + control


def test_a_corrupt_batch_is_refused_and_nothing_of_the_answer_is_written(storage: Storage) -> None:
    good = build_batch(_records(2), base_offset=0)
    bad = bytearray(build_batch(_records(2), base_offset=2))
    bad[-1] ^= 0xFF
    log = storage.log(T, 0)
    with pytest.raises(CrcMismatchError):
        log.append_replicated(good + bytes(bad))
    assert log.log_end_offset == 0


def test_offset_deltas_that_do_not_rise_are_refused(storage: Storage) -> None:
    backwards = build_batch(_records(2), base_offset=0, offset_deltas=[3, 1], last_offset_delta=4)
    with pytest.raises(RecordsError, match="does not rise"):
        storage.log(T, 0).append_replicated(backwards)


def test_a_batch_below_the_log_end_is_refused(storage: Storage) -> None:
    log = storage.log(T, 0)
    log.append_replicated(build_batch(_records(3), base_offset=0))
    with pytest.raises(CorruptBatchError, match="below the log end"):
        log.append_replicated(build_batch(_records(1), base_offset=1))


def test_clients_cannot_produce_to_a_followed_topic_until_it_is_unfollowed(storage: Storage) -> None:
    with pytest.raises(FollowedTopicError, match="read-only"):
        storage.log(T, 0).append(build_batch(_records(1)))
    storage.follow_topic(T, None)
    assert storage.log(T, 0).append(build_batch(_records(1))).base_offset == 0


def test_followed_survives_a_reopen_and_new_partitions_are_followed(tmp_path: Path, storage: Storage) -> None:
    storage.close()
    again = Storage.open(tmp_path / "data", clock=FakeClock())
    assert again.topic(T).followed_from == "leader:9092"
    again.create_partitions(T, 2, follower=True)  # as the mirror grows it
    with pytest.raises(FollowedTopicError):
        again.log(T, 1).append(build_batch(_records(1)))
    again.close()


def test_no_log_append_time_stamp_on_a_follower_append(tmp_path: Path) -> None:
    s = Storage.open(tmp_path / "data", clock=FakeClock())
    s.create_topic(T, 1, {"message.timestamp.type": "LogAppendTime"}, followed_from="leader:9092")
    batch = build_batch(_records(2), base_offset=0, log_append_time=True)
    s.log(T, 0).append_replicated(batch)
    assert s.log(T, 0).read(0, 1 << 20).data() == batch
    s.close()


def test_following_the_log_start_past_the_end_restarts_the_log_there(storage: Storage) -> None:
    log = storage.log(T, 0)
    log.append_replicated(build_batch(_records(5), base_offset=0))
    assert storage.follow_log_start(T, 0, 3) == 3
    assert storage.follow_log_start(T, 0, 100) == 100
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    log.append_replicated(build_batch(_records(2), base_offset=100))
    assert [r.offset for r in log.records(100)] == [100, 101]


def test_delete_records_on_a_followed_topic_is_refused(storage: Storage) -> None:
    storage.log(T, 0).append_replicated(build_batch(_records(5), base_offset=0))
    with pytest.raises(FollowedTopicError, match="at the source"):
        storage.truncate_before(T, 0, 3)
    assert storage.log(T, 0).log_start_offset == 0
