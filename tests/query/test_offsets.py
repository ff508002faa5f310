"""By offset → that record or the next surviving one, and broker position IDs the same
way: offsets compacted away, offsets in a gap or on a transaction marker, offsets below
the log start after retention. Offsets past the end stay a clear error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logtrove.cli.main import app
from logtrove.query import IdQuery, Message, OffsetQuery, PositionQuery, QueryEngine, position_id
from logtrove.records import NewRecord, Record, build_batch
from logtrove.storage import OffsetOutOfRangeError, PartitionLog, Storage
from logtrove.storage.cleaner import Cleaner
from logtrove.testing import FakeClock

T0 = 1_763_800_000_000


def surviving(log: PartitionLog) -> list[Record]:
    """Brute force: the data records the log holds, in offset order."""
    return [
        r
        for header, _ in log.batches()
        if not header.is_control
        for r in log.records(header.base_offset, header.next_offset)
    ]


def expected_at(records: list[Record], offset: int) -> Record:
    return next(r for r in records if r.offset >= offset)


def answers(engine: QueryEngine, topic: str, partition: int, offset: int) -> Iterator[Message]:
    """The same question asked three ways: by offset, by position ID, and by ID."""
    (by_offset,) = engine.run(OffsetQuery(topic, partition, offset)).all()[0]
    yield by_offset
    pid = position_id(topic, partition, offset)
    (by_position,) = engine.run(PositionQuery(pid)).all()[0]
    yield by_position
    (by_id,) = engine.run(IdQuery(topic, pid, limit=1)).all()[0]
    yield by_id


def assert_resolves(engine: QueryEngine, topic: str, partition: int, offset: int, want: Record) -> None:
    for got in answers(engine, topic, partition, offset):
        assert (got.partition, got.offset, got.key, got.value) == (
            partition,
            want.offset,
            want.key,
            want.value,
        )


@pytest.fixture
def compacted(tmp_path: Path) -> Path:
    """A compacted topic: 5 keys overwritten 40 times, rolled and cleaned, then 3 more
    records in the active segment."""
    path = tmp_path / "data"
    clock = FakeClock(T0)
    with Storage.open(path, clock=clock) as storage:
        storage.create_topic("users", 1, {"cleanup.policy": "compact", "segment.bytes": "2000"})
        log = storage.log("users", 0)
        for i in range(200):
            clock.advance(10)
            log.append(build_batch([NewRecord(b"v%d" % i, b"k%d" % (i % 5), (), clock.now_ms())]))
        log.roll()
        for i in range(200, 203):
            log.append(build_batch([NewRecord(b"v%d" % i, b"k%d" % (i % 5), (), clock.now_ms())]))
        Cleaner(storage).clean_until_caught_up(log)
    return path


def test_offset_compacted_away_gives_the_next_surviving_record(compacted: Path) -> None:
    with Storage.open(compacted, read_only=True) as storage:
        engine = QueryEngine(storage)
        records = surviving(storage.log("users", 0))
        kept = [r.offset for r in records]
        assert kept == [195, 196, 197, 198, 199, 200, 201, 202]  # the cleaner kept each key's latest
        for offset in (0, 1, 57, 150, 194, 195, 199, 202):
            assert_resolves(engine, "users", 0, offset, expected_at(records, offset))
        (m,) = engine.run(OffsetQuery("users", 0, 3)).all()[0]
        assert (m.offset, m.key, m.value) == (195, b"k0", b"v195")


def test_cli_offset_and_position_id_agree_on_a_compacted_offset(compacted: Path) -> None:
    runner = CliRunner()
    data = str(compacted)
    by_offset = runner.invoke(app, ["query", "users", "-p", "0", "--offset", "42", "--json", "--data", data])
    pid = position_id("users", 0, 42)
    by_id = runner.invoke(app, ["query", "users", "--id", pid, "--json", "--data", data])
    assert by_offset.exit_code == 0 and by_id.exit_code == 0
    assert json.loads(by_offset.stdout)["offset"] == json.loads(by_id.stdout)["offset"] == 195


def test_offset_in_a_gap_or_on_a_transaction_marker_gives_the_next_record(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "data", clock=FakeClock(T0)) as storage:
        storage.create_topic("gaps", 1)
        log = storage.log("gaps", 0)
        log.append(build_batch([NewRecord(b"a%d" % i, b"k") for i in range(10)]))  # 0-9
        log.append(
            build_batch([NewRecord(b"b%d" % i, b"k") for i in range(5)], base_offset=20), assign_offsets=False
        )
        marker = NewRecord(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x00")  # commit marker
        log.append(
            build_batch(
                [marker], base_offset=25, control=True, transactional=True, producer_id=7, producer_epoch=0
            ),
            assign_offsets=False,
        )
        log.append(build_batch([NewRecord(b"c0", b"k")]))  # 26
        engine = QueryEngine(storage)
        records = surviving(log)
        assert [r.offset for r in records] == [*range(10), *range(20, 25), 26]
        for offset in (10, 15, 19):
            assert_resolves(engine, "gaps", 0, offset, records[10])  # b0 at 20
        assert_resolves(engine, "gaps", 0, 25, records[-1])  # the marker is not a message


def test_offset_below_the_log_start_gives_the_first_record(tmp_path: Path) -> None:
    path = tmp_path / "data"
    with Storage.open(path, clock=FakeClock(T0)) as storage:
        storage.create_topic("old", 1, {"segment.bytes": "1500"})
        log = storage.log("old", 0)
        for i in range(100):
            log.append(build_batch([NewRecord(b"v%d" % i, b"k%d" % i)]))
        assert log.segments[0].next_offset < 43 < log.segments[-1].base_offset
        assert log.truncate_before(43) == 43  # mid-segment: 43's segment still holds earlier records
        engine = QueryEngine(storage)
        first = surviving(log)[0]
        assert first.offset == 43
        for offset in (0, 1, 42):
            assert_resolves(engine, "old", 0, offset, first)
    with Storage.open(path, read_only=True) as storage:  # and after reopening
        engine = QueryEngine(storage)
        assert_resolves(engine, "old", 0, 0, first)
        assert_resolves(engine, "old", 0, 50, expected_at(surviving(storage.log("old", 0)), 50))


def test_offset_past_the_end_is_still_an_error(compacted: Path) -> None:
    with Storage.open(compacted, read_only=True) as storage:
        engine = QueryEngine(storage)
        for offset in (203, 10_000):
            with pytest.raises(OffsetOutOfRangeError, match="past the end of users-0"):
                engine.run(OffsetQuery("users", 0, offset))
            with pytest.raises(OffsetOutOfRangeError, match="past the end of users-0"):
                engine.run(PositionQuery(position_id("users", 0, offset))).all()
            assert engine.run(IdQuery("users", position_id("users", 0, offset))).all()[0] == []
