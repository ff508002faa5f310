"""The mirror's follower append of one Fetch answer (:func:`logtrove.mirror.append_fetched`):
a torn last batch is left for the next fetch, framing that no cut can produce refuses
the whole answer, and what the log already has is skipped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from logtrove.mirror import append_fetched
from logtrove.records import InvalidLengthError, NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.testing import FakeClock

T = "m"


@pytest.fixture
def log(tmp_path: Path) -> Iterator[PartitionLog]:
    with Storage.open(tmp_path / "data", clock=FakeClock()) as storage:
        storage.create_topic(T, 1, followed_from="leader:9092")
        yield storage.log(T, 0)


def _batch(offset: int, n: int = 2) -> bytes:
    return build_batch([NewRecord(b"v%d" % i, timestamp=1_000) for i in range(n)], base_offset=offset)


def test_a_torn_last_batch_is_left_for_the_next_fetch(log: PartitionLog) -> None:
    one, two = _batch(0), _batch(2)
    appended = append_fetched(log, one + two[:-7])
    assert (appended.batches, appended.records, appended.bytes, appended.partial) == (1, 2, len(one), True)
    appended = append_fetched(log, one + two)  # the source answers from the batch holding the end
    assert (appended.batches, appended.bytes, appended.partial) == (1, len(two), False)
    assert [bytes(b) for _, b in log.batches(0)] == [one, two]


def test_a_batch_length_smaller_than_a_header_refuses_the_whole_answer(log: PartitionLog) -> None:
    bad = bytearray(_batch(2))
    bad[8:12] = (-1).to_bytes(4, "big", signed=True)
    with pytest.raises(InvalidLengthError):
        append_fetched(log, _batch(0) + bytes(bad))  # not a torn tail to be fetched again forever
    assert log.log_end_offset == 0
