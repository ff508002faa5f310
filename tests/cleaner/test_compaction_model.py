"""Model tests for compaction: random keyed writes, overwrites and tombstones, random
cleaning rounds with a tiny map budget, random reopen; the log always reads back as each
key's latest value, offsets unchanged."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from logtrove.records import iter_records
from logtrove.storage import InvalidRecordError, PartitionLog
from logtrove.storage.cleaner import (
    Cleaner,
    OffsetMapFile,
    clean_partition,
    first_uncleanable_offset,
    write_offset_map_file,
)
from logtrove.storage.errors import CleanCancelledError
from logtrove.testing import FakeClock

from .helpers import DAY, Model, open_compacted, write_keyed


def live_records(log: PartitionLog, below: int) -> list[tuple[int, bytes, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in log.records(0, below)]  # type: ignore[misc]


def check_against_model(log: PartitionLog, model: Model, tombstones_expired: bool) -> None:
    below = first_uncleanable_offset(log, log.clock.now_ms())
    got = live_records(log, below)
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got), "records out of offset order"
    assert got == model.expected(below, tombstones_expired)


@pytest.mark.parametrize("seed", range(6))
def test_random_rounds_with_tiny_map_keep_the_latest_value_per_key(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    cleaner = Cleaner(storage, map_budget_bytes=24 * rng.choice([8, 16, 64]))
    model = Model()
    for _step in range(12):
        write_keyed(log, model, rng, clock, rng.randint(5, 40))
        before_end = log.log_end_offset
        for _ in range(rng.randint(0, 6)):
            cleaner.clean(log)
        assert log.log_end_offset == before_end  # cleaning never changes offsets
        if rng.random() < 0.3:
            if rng.random() < 0.5:
                storage.close()
            else:
                storage.abandon()
            storage, log = open_compacted(tmp_path / "d", clock)
            cleaner = Cleaner(storage, map_budget_bytes=cleaner.map_budget_bytes)
    log.roll()
    rounds = cleaner.clean_until_caught_up(log)
    assert rounds[-1].first_dirty_after >= rounds[-1].first_uncleanable
    check_against_model(log, model, tombstones_expired=False)
    # tombstones survive their first cleaning, then go once the horizon passes
    clock.advance(DAY + 1)
    log.roll()
    cleaner.clean_until_caught_up(log)
    Cleaner(storage).clean(log)
    check_against_model(log, model, tombstones_expired=True)
    storage.close()


def test_reading_a_compacted_away_offset_returns_the_next_surviving_record(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    model = Model()
    write_keyed(log, model, random.Random(3), clock, 200, keys=5, tombstone_share=0.0)
    log.roll()
    Cleaner(storage).clean_until_caught_up(log)
    survivors = sorted(offset for offset, _, _ in model.latest.values())
    assert log.log_start_offset == 0  # earliest stays where it was
    for target in range(survivors[-1] + 1):
        result = log.read(target, 1)
        first = next(r for r in iter_records(result.data()) if r.offset >= target)
        assert first.offset == min(o for o in survivors if o >= target)
    storage.close()


def test_the_log_start_stays_at_a_reopen_when_cleaning_emptied_the_first_segment(tmp_path: Path) -> None:
    """Kafka keeps an empty cleaned segment, so its log start offset stays put; dropping it
    on reopen as a crash leftover would raise the log start (and ListOffsets' earliest) to
    the next segment's base: a standby then differs from its leader after a restart."""
    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    model = Model()
    write_keyed(log, model, random.Random(3), clock, 200, keys=5, tombstone_share=0.0)
    log.roll()
    Cleaner(storage).clean_until_caught_up(log)
    assert log.segments[0].size == 0 and log.segments[1].base_offset > 0  # what the test is about
    storage.close()
    storage, log = open_compacted(tmp_path / "d", clock)
    assert log.log_start_offset == 0
    assert log.segments[0].base_offset == 0
    survivors = sorted(offset for offset, _, _ in model.latest.values())
    assert [r.offset for r in iter_records(log.read(0, 1 << 20).data())][:1] == survivors[:1]
    storage.close()


def test_time_lookups_stay_exact_after_cleaning(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    write_keyed(log, Model(), random.Random(5), clock, 300, keys=30)
    log.roll()
    Cleaner(storage, map_budget_bytes=24 * 10).clean_until_caught_up(log)
    records = list(log.records())
    for target in sorted({r.timestamp for r in records})[::7]:
        expected = next((r for r in records if r.timestamp >= target), None)
        found = log.offset_for_timestamp(target)
        assert found is not None and expected is not None
        assert (found.offset, found.timestamp) == (expected.offset, expected.timestamp)
    storage.close()


def test_precomputed_offset_map_gives_the_same_result(tmp_path: Path) -> None:
    results = []
    for use_file in (False, True):
        clock = FakeClock()
        storage, log = open_compacted(tmp_path / f"d{use_file}", clock)
        model = Model()
        write_keyed(log, model, random.Random(11), clock, 150, keys=40, tombstone_share=0.0)
        log.roll()
        if use_file:
            path = tmp_path / "map.bin"
            write_offset_map_file(path, ((k, o) for k, (o, _, _) in model.latest.items()), log.log_end_offset)
            lookup = OffsetMapFile(path)
            clean_partition(log, first_dirty=0, now_ms=clock.now_ms(), budget_bytes=0, offset_map=lookup)
            lookup.close()
        else:
            Cleaner(storage).clean_until_caught_up(log)
        results.append(live_records(log, log.log_end_offset))
        storage.close()
    assert results[0] == results[1]
    assert len(results[0]) == 40


def test_keyless_records_are_refused_by_compacted_topics(tmp_path: Path) -> None:
    from logtrove.records import NewRecord, build_batch

    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    with pytest.raises(InvalidRecordError, match="needs a key"):
        log.append(build_batch([NewRecord(b"v", b"k"), NewRecord(b"v", None)]))
    assert log.log_end_offset == 0
    storage.close()


def test_a_failing_partition_is_marked_uncleanable_and_others_still_clean(tmp_path: Path) -> None:
    import crc32c

    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    storage.create_topic("other", 1, {"cleanup.policy": "compact", "segment.bytes": "2048"})
    other = storage.log("other", 0)
    rng = random.Random(2)
    write_keyed(log, Model(), rng, clock, 100, keys=5, tombstone_share=0.0)
    write_keyed(other, Model(), rng, clock, 100, keys=5, tombstone_share=0.0)
    log.roll()
    other.roll()
    # corrupt a record inside the first (uncompressed) batch but keep its CRC valid
    seg = log.segments[0]
    position, header = next((p, h) for p, h in seg.batches() if h.compression == 0)
    raw = bytearray(seg.read(position, header.size))
    raw[61] = 0x7F  # first record's length varint now overruns the batch
    raw[17:21] = crc32c.crc32c(bytes(raw[21:])).to_bytes(4, "big")
    with seg.log_path.open("r+b") as f:
        f.seek(position)
        f.write(raw)
    cleaner = Cleaner(storage)
    cleaned = [cleaner.run_once(), cleaner.run_once(), cleaner.run_once()]
    assert any(stats is not None for stats in cleaned)  # "other" was cleaned
    status = cleaner.status(log)
    assert status.uncleanable_reason is not None and "CorruptRecordError" in status.uncleanable_reason
    assert cleaner.status(other).last_clean_ms is not None
    storage.close()


def test_a_cancelled_round_leaves_the_partition_intact_and_cleanable(tmp_path: Path) -> None:
    """What a broker shutdown does to a round in progress: the copy stops at a batch, the
    unfinished ``.cleaned`` segment is removed, the partition is not marked uncleanable,
    and the next round completes."""
    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    model = Model()
    write_keyed(log, model, random.Random(3), clock, 300, keys=20)
    log.roll()
    before = live_records(log, log.log_end_offset)
    cleaner = Cleaner(storage)
    calls: list[str] = []

    def stop_midway(phase: str, done: int, total: int) -> None:
        calls.append(phase)
        if phase == "copy" and done > total // 2:
            raise CleanCancelledError("stopping")

    with pytest.raises(CleanCancelledError):
        cleaner.clean(log, progress=stop_midway)
    assert "copy" in calls
    assert not list(log.directory.glob("*.cleaned*"))
    assert cleaner.status(log).uncleanable_reason is None
    assert live_records(log, log.log_end_offset)[-1] == before[-1]
    cleaner.clean_until_caught_up(log)
    check_against_model(log, model, tombstones_expired=False)
    storage.close()
