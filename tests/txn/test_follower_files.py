"""Transaction files of a followed partition (storage/txnfollow.py): the mirror's follower
append copies the leader's batches and markers, and each roll leaves the same
``.txnindex`` and ``.snapshot`` a writer's roll leaves, so readers of the standby start
from the files instead of walking the whole log. Checked against a walk of every header
and a brute force over the log and its markers."""

from __future__ import annotations

import random
from pathlib import Path

from tests.txn.txn_log import Writer, brute_force_visible, check_ranges, data_offsets, rchar, workload

from logtrove.mirror.follower import append_fetched
from logtrove.storage import PartitionLog, Storage
from logtrove.storage.truncate import truncate_log
from logtrove.storage.txnindex import read_snapshot, read_txn_index
from logtrove.storage.txnview import committed_view
from logtrove.txn import TxnIndexes
from logtrove.txn.partition import load, scan

TOPIC = "t"
SETTINGS = {"segment.bytes": "20000"}


def copy(source: PartitionLog, dest: PartitionLog, start: int, end: int) -> None:
    """Follower appends of the source's batches beginning in ``[start, end)``, a few
    batches per fetched answer, as the mirror does."""
    chunk: list[bytes] = []
    for header, data in source.batches(start):
        if header.base_offset >= end:
            break
        chunk.append(bytes(data))
        if len(chunk) == 5:
            append_fetched(dest, b"".join(chunk))
            chunk = []
    if chunk:
        append_fetched(dest, b"".join(chunk))


def assert_files_match_the_log(log: PartitionLog) -> None:
    """Every sealed segment's .txnindex and every later segment's snapshot say what a walk
    of all the headers up to there says."""
    segments = log.segments
    assert len(segments) > 5
    for i, seg in enumerate(segments[:-1]):
        upper = segments[i + 1].base_offset
        walked = scan(log, end=upper)
        assert read_txn_index(seg) == [a for a in walked.aborted if a.last_offset >= seg.base_offset], i
        assert read_snapshot(log.directory, upper) == walked.open, i


def test_a_followed_partitions_rolls_write_its_transaction_files(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "source") as src, Storage.open(tmp_path / "standby") as dst:
        src.create_topic(TOPIC, 1, SETTINGS)
        source = src.log(TOPIC, 0)
        workload(Writer(source, TxnIndexes()), random.Random(21), 1_200)
        dst.create_topic(TOPIC, 1, SETTINGS, followed_from="source")
        standby = dst.log(TOPIC, 0)
        assert standby.follower
        indexes = TxnIndexes()  # the broker's read_committed Fetch of the standby
        half = source.log_end_offset // 2
        copy(source, standby, 0, half)
        check_ranges(standby, indexes, random.Random(23), 150)
        copy(source, standby, half, source.log_end_offset)
        assert standby.log_end_offset == source.log_end_offset
        assert_files_match_the_log(standby)
        check_ranges(standby, indexes, random.Random(24), 300)  # exact, before and after rolls
        txns = indexes.get(standby)  # the files say what its walk found: they replace memory
        assert txns.files_to == standby.active.base_offset
        assert all(a.last_offset >= txns.files_to for a in txns.aborted)
    with Storage.open(tmp_path / "standby", read_only=True) as reader:  # a reader of the standby
        log = reader.log(TOPIC, 0)
        before = rchar()
        loaded = load(log, repair=False)
        assert loaded.walk_start == log.active.base_offset  # the files cover the sealed segments
        assert rchar() - before < 2 * log.active.size + 64_000
        view = committed_view(log)
        assert [o for o in data_offsets(log) if view.visible(o)] == brute_force_visible(log)


def test_a_standby_whose_mirror_starts_late_and_truncates_gets_right_files(tmp_path: Path) -> None:
    """Segments copied before the process that installs the follower's listener (a restart
    of the mirror) are repaired at its first append; a truncation reloads the state."""
    with Storage.open(tmp_path / "source") as src:
        src.create_topic(TOPIC, 1, SETTINGS)
        source = src.log(TOPIC, 0)
        workload(Writer(source, TxnIndexes()), random.Random(22), 1_500)
        with Storage.open(tmp_path / "standby") as dst:
            dst.create_topic(TOPIC, 1, SETTINGS, followed_from="source")
            standby = dst.log(TOPIC, 0)
            for header, data in source.batches(0):  # appended without the mirror's hook
                if header.base_offset >= source.log_end_offset // 3:
                    break
                standby.append_replicated(bytes(data))
        with Storage.open(tmp_path / "standby") as dst:  # the mirror's next start
            standby = dst.log(TOPIC, 0)
            copy(source, standby, standby.log_end_offset, 2 * source.log_end_offset // 3)
            assert_files_match_the_log(standby)
            cut = standby.segments[-3].base_offset + 7
            truncate_log(standby, cut)
            copy(source, standby, standby.log_end_offset, source.log_end_offset)
            assert standby.log_end_offset == source.log_end_offset
            assert_files_match_the_log(standby)
