"""The topic histogram (``logtrove.query.histogram``) against brute force: every record
decoded and counted by its own timestamp."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from logtrove.query import InvalidQueryError, histogram, pick_bucket, topic_span
from logtrove.query.histogram import HistogramTimeoutError
from logtrove.records import Compression, NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.storage.derived.indexer import PartitionIndexer

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000


def brute_counts(logs: list[PartitionLog], edges: tuple[int, ...]) -> list[int]:
    """Records per bucket by their own timestamps, every record decoded."""
    counts = [0] * (len(edges) - 1)
    for log in logs:
        for record in log.records():
            for i in range(len(counts)):
                if edges[i] <= record.timestamp < edges[i + 1]:
                    counts[i] += 1
    return counts


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    with Storage.open(tmp_path / "data") as opened:
        yield opened


def fill(log: PartitionLog, rng: random.Random, n: int, *, shuffle_ms: int = 0) -> None:
    """``n`` records about 0.9 s apart in batches of 1–40 (mixed compressions), so
    batches straddle minute edges and the log spans several segments."""
    ts = T0 + rng.randrange(60_000)
    done = 0
    while done < n:
        size = min(rng.randint(1, 40), n - done)
        records = []
        for _ in range(size):
            ts += rng.randint(0, 1800)
            jitter = rng.randint(-shuffle_ms, shuffle_ms) if shuffle_ms else 0
            records.append(NewRecord(b"v" * rng.randint(10, 200), None, (), ts + jitter))
        codec = rng.choice([Compression.NONE, Compression.NONE, Compression.GZIP, Compression.ZSTD])
        log.append(build_batch(records, compression=codec))
        done += size


def test_counts_equal_brute_force_over_many_segments(storage: Storage) -> None:
    storage.create_topic("t", 2, {"segment.bytes": "20000", "index.interval.bytes": "1024"})
    rng = random.Random(1)
    logs = [storage.log("t", p) for p in range(2)]
    for log in logs:
        fill(log, rng, 3000)
    assert all(len(log.segments) > 5 for log in logs)
    span = topic_span(logs)
    assert span is not None
    plan = pick_bucket(*span, "minute", 2000)
    found = histogram(logs, plan.edges)
    assert list(found.counts) == brute_counts(logs, plan.edges)
    assert sum(found.counts) == sum(log.log_end_offset for log in logs)
    assert found.batches_scanned > 0  # batches straddling an edge were read, and counted right


def test_a_range_inside_the_log_counts_only_its_records(storage: Storage) -> None:
    storage.create_topic("t", 1, {"segment.bytes": "15000"})
    log = storage.log("t", 0)
    fill(log, random.Random(2), 2000)
    plan = pick_bucket(T0 + 7 * MINUTE + 12_345, T0 + 19 * MINUTE + 999, "minute", 100)
    assert plan.edges[1] == T0 + 8 * MINUTE  # inner edges sit on whole minutes
    found = histogram([log], plan.edges)
    assert list(found.counts) == brute_counts([log], plan.edges)


def test_out_of_order_timestamps_are_counted_by_their_own_timestamps(storage: Storage) -> None:
    storage.create_topic("t", 1, {"segment.bytes": "10000", "index.interval.bytes": "512"})
    log = storage.log("t", 0)
    fill(log, random.Random(3), 1500, shuffle_ms=20_000)
    span = topic_span([log])
    assert span is not None
    assert span[0] == min(r.timestamp for r in log.records())  # not the first batch's base
    plan = pick_bucket(*span, "minute", 2000)
    found = histogram([log], plan.edges)
    assert list(found.counts) == brute_counts([log], plan.edges)
    assert sum(found.counts) == log.log_end_offset  # every record is somewhere


def test_records_below_the_log_start_offset_are_not_counted(storage: Storage) -> None:
    storage.create_topic("t", 1, {"segment.bytes": "10000"})
    log = storage.log("t", 0)
    fill(log, random.Random(4), 1000)
    log.truncate_before(437)  # inside a segment and, most likely, inside a batch
    span = topic_span([log])
    assert span is not None
    plan = pick_bucket(*span, "minute", 2000)
    found = histogram([log], plan.edges)
    assert list(found.counts) == brute_counts([log], plan.edges)
    assert sum(found.counts) == log.log_end_offset - 437


def test_log_append_time_batches_count_at_their_append_time(storage: Storage) -> None:
    storage.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"})
    log = storage.log("t", 0)
    for i in range(5):
        batch = build_batch([NewRecord(b"x", None, (), T0 + i) for _ in range(3)], log_append_time=True)
        log.append(batch)
    span = topic_span([log])
    assert span is not None
    edges = pick_bucket(*span, "auto", 50).edges
    found = histogram([log], edges)
    assert sum(found.counts) == 15
    assert list(found.counts) == brute_counts([log], edges)


def test_an_empty_topic_has_no_span(storage: Storage) -> None:
    storage.create_topic("t", 3)
    assert topic_span([storage.log("t", p) for p in range(3)]) is None


def test_auto_bucket_picks_the_smallest_width_that_fits() -> None:
    assert pick_bucket(T0, T0 + 3 * 3_600_000, "auto", 200).unit == "minute"
    assert pick_bucket(T0, T0 + 3 * 86_400_000, "auto", 200).unit == "hour"
    assert pick_bucket(T0, T0 + 150 * 86_400_000, "auto", 200).unit == "day"
    wide = pick_bucket(T0, T0 + 20 * 365 * 86_400_000, "auto", 100)
    assert len(wide.edges) - 1 <= 100 and wide.width_ms % 86_400_000 == 0


@pytest.mark.parametrize(
    ("start", "end", "unit", "max_buckets", "message"),
    [
        (T0, T0, "minute", 10, "empty"),
        (T0, T0 + 86_400_000, "second", 100, "choose a wider bucket"),
        (T0, T0 + 1000, "fortnight", 10, "unknown bucket"),
        (T0, T0 + 1000, "auto", 0, "max_buckets"),
    ],
)
def test_bad_bucket_requests_say_what_is_wrong(
    start: int, end: int, unit: str, max_buckets: int, message: str
) -> None:
    with pytest.raises(InvalidQueryError, match=message):
        pick_bucket(start, end, unit, max_buckets)


def test_indexed_blocks_headers_and_records_each_settle_a_part(storage: Storage) -> None:
    """In order for a while, then two producers whose clocks are ten minutes apart
    writing in turns, then in order again; indexed in small blocks with an unindexed
    tail: whole blocks, whole batches and record timestamps all count some records, and
    every bucket equals brute force."""
    storage.create_topic("t", 1, {"segment.bytes": "30000"})
    log = storage.log("t", 0)
    rng = random.Random(5)
    ts = T0
    for turn in range(400):
        skewed = 100 <= turn < 250 and turn % 2 == 1
        records = []
        for _ in range(rng.randint(1, 12)):
            ts += rng.randint(0, 1500)
            records.append(NewRecord(b"v" * 30, None, (), ts - (600_000 if skewed else 0)))
        log.append(build_batch(records, compression=rng.choice([Compression.NONE, Compression.LZ4])))
    PartitionIndexer(log, block_records=60).step(log.log_end_offset - 200)
    span = topic_span([log])
    assert span is not None and span[0] == min(r.timestamp for r in log.records())
    plan = pick_bucket(*span, "minute", 2000)
    found = histogram([log], plan.edges)
    assert list(found.counts) == brute_counts([log], plan.edges)
    assert sum(found.counts) == log.log_end_offset
    assert found.blocks_counted > 0 and found.batches_counted > 0 and found.batches_scanned > 0
    assert 0 < sum(found.decoded) < sum(found.counts)
    again = histogram([log], plan.edges)  # the batches read are now bounded from below
    assert again.counts == found.counts and again.batches_scanned < found.batches_scanned
    for unit in ("15 minutes", "hour"):
        other = pick_bucket(*span, unit, 2000)
        assert list(histogram([log], other.edges).counts) == brute_counts([log], other.edges), unit


def test_a_deadline_past_stops_the_count_rather_than_answer_part_of_it(storage: Storage) -> None:
    storage.create_topic("t", 1)
    log = storage.log("t", 0)
    fill(log, random.Random(6), 300)
    with pytest.raises(HistogramTimeoutError, match="took too long"):
        histogram([log], (T0, T0 + 3_600_000), deadline=time.monotonic() - 1)
