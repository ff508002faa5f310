"""The cleaner's per-record passes: the compiled twin gives the same tables, bytes and
errors as the pure-Python one, on real segments and on damaged payloads, and a rebuilt
batch's records are the bytes ``build_batch`` makes from the survivors."""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from logtrove.records import BatchHeader, build_batch, iter_records, read_header, validate_batch
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE, HEADER_SIZE
from logtrove.records.record import batch_payload
from logtrove.storage import PartitionLog
from logtrove.storage.cleaner import Cleaner, OffsetMap, OffsetMapFile, passes, write_offset_map_file
from logtrove.testing import FakeClock

from .helpers import DAY, Model, open_compacted, write_keyed

BASE_AND_MAX_TS = struct.Struct(">qq")  # at byte 27 of a batch header

compiled = pytest.mark.skipif(passes.NATIVE is None, reason="the compiled passes are not built")


def real_batches(log: PartitionLog) -> list[tuple[BatchHeader, bytes]]:
    return [(h, bytes(batch_payload(data, h))) for h, data in log.batches()]


@pytest.fixture
def keyed_log(tmp_path: Path) -> Iterator[tuple[PartitionLog, Model]]:
    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    model = Model()
    write_keyed(log, model, random.Random(4), clock, 120, keys=40, tombstone_share=0.2)
    log.roll()
    yield log, model
    storage.close()


def map_with(
    impl: passes.MapRecords, batches: list[tuple[BatchHeader, bytes]], budget: int, first_dirty: int
):
    table = bytearray(budget)
    capacity = int(budget // 24 * 0.9)
    size, stops = 0, []
    for header, payload in batches:
        size, full_at = impl(
            table, capacity, size, payload, header.base_offset, header.record_count, first_dirty, 2**62
        )
        stops.append(full_at)
    return bytes(table), size, stops


@compiled
@pytest.mark.parametrize("budget", [24 * 8, 24 * 30, 24 * 1000])
def test_both_map_passes_build_the_same_table(keyed_log: tuple[PartitionLog, Model], budget: int) -> None:
    log, _ = keyed_log
    batches = real_batches(log)
    assert passes.NATIVE is not None
    for first_dirty in (0, batches[len(batches) // 3][0].base_offset + 1):
        assert map_with(passes.py_map_records, batches, budget, first_dirty) == map_with(
            passes.NATIVE.map_records, batches, budget, first_dirty
        )


def test_the_map_pass_table_answers_as_offset_map_put_does(keyed_log: tuple[PartitionLog, Model]) -> None:
    log, model = keyed_log
    offset_map = OffsetMap(24 * 1000)
    for header, payload in real_batches(log):
        offset_map.size, full_at = passes.map_records(
            offset_map.table,
            offset_map.capacity,
            offset_map.size,
            payload,
            header.base_offset,
            header.record_count,
            0,
            2**62,
        )
        assert full_at is None
    assert offset_map.size == len(model.latest)
    for key, (offset, _value, _ts) in model.latest.items():
        assert offset_map.latest(key) == offset


def filter_all(impl, table: bytes, layout: int, batches, *, end: int, now: int, horizon_of):
    out = []
    for header, payload in batches:
        append_ts = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
        out.append(
            impl(
                table,
                layout,
                payload,
                header.base_offset,
                header.record_count,
                header.base_timestamp,
                append_ts,
                horizon_of(header),
                now,
                now + DAY,
                end,
            )
        )
    return out


@compiled
@pytest.mark.parametrize("layout", [passes.HASHED, passes.SORTED])
def test_both_copy_passes_decide_and_rebuild_the_same(
    tmp_path: Path, keyed_log: tuple[PartitionLog, Model], layout: int
) -> None:
    log, model = keyed_log
    batches = real_batches(log)
    if layout == passes.HASHED:
        table, _, _ = map_with(passes.py_map_records, batches, 24 * 1000, 0)
    else:
        path = tmp_path / "map.bin"
        write_offset_map_file(path, ((k, o) for k, (o, _, _) in model.latest.items()), log.log_end_offset)
        table = path.read_bytes()
    assert passes.NATIVE is not None
    middle = batches[len(batches) // 2][0].base_offset + 3
    seen = set()
    for end in (log.log_end_offset, middle):
        for horizon_of in (lambda h: h.delete_horizon_ms, lambda h: 1_000):  # none yet / expired
            expected = filter_all(
                passes.py_filter_records, table, layout, batches, end=end, now=5_000, horizon_of=horizon_of
            )
            got = filter_all(
                passes.NATIVE.filter_records,
                table,
                layout,
                batches,
                end=end,
                now=5_000,
                horizon_of=horizon_of,
            )
            assert got == expected
            seen.update("rebuilt" if r[0] else "copied" if r[2] else "dropped" for r in got)
    assert seen == {"rebuilt", "copied", "dropped"}


def test_rebuilt_records_are_what_build_batch_encodes_from_the_survivors(
    keyed_log: tuple[PartitionLog, Model],
) -> None:
    log, _ = keyed_log
    offset_map = OffsetMap(24 * 1000)
    for header, payload in real_batches(log):
        offset_map.put_records(payload, header.base_offset, header.record_count, 0, 2**62)
    now = 5_000
    rebuilt = 0
    for header, data in log.batches():
        result = passes.filter_records(
            offset_map.table,
            passes.HASHED,
            batch_payload(data, header),
            header.base_offset,
            header.record_count,
            header.base_timestamp,
            None,
            None,
            now,
            now + DAY,
            log.log_end_offset,
        )
        if result.records is None:
            continue
        rebuilt += 1
        survivors = [
            r
            for r in iter_records(data, 0, header)
            if r.key is not None and offset_map.latest(r.key) == r.offset
        ]
        reference = build_batch(
            survivors,
            base_offset=header.base_offset,
            offset_deltas=[r.offset - header.base_offset for r in survivors],
            last_offset_delta=header.last_offset_delta,
            delete_horizon=result.horizon,
        )
        assert reference[HEADER_SIZE:] == result.records
        assert (result.base_ts, result.max_ts) == BASE_AND_MAX_TS.unpack_from(reference, 27)
        assert result.kept == len(survivors)
        assert result.horizon == (now + DAY if any(r.value is None for r in survivors) else None)
    assert rebuilt > 5


def outcome(fn, *args):
    try:
        return fn(*args)
    except ValueError as exc:
        return ("ValueError", str(exc))


@compiled
def test_both_twins_fail_alike_on_damaged_payloads(keyed_log: tuple[PartitionLog, Model]) -> None:
    log, _ = keyed_log
    assert passes.NATIVE is not None
    native_map, native_filter = passes.NATIVE.map_records, passes.NATIVE.filter_records
    rng = random.Random(8)
    uncompressed = [(h, p) for h, p in real_batches(log) if h.compression == 0 and len(p) > 20]
    errors = 0
    for trial in range(600):
        header, payload = rng.choice(uncompressed)
        damaged = bytearray(payload)
        if trial % 3 == 0:
            damaged = damaged[: rng.randrange(len(damaged))]
        else:
            for _ in range(rng.randint(1, 3)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        count = header.record_count + rng.choice([0, 0, 0, -1, 1, 2**31 - 1, -5])
        py_table, c_table = bytearray(24 * 50), bytearray(24 * 50)
        py = outcome(
            passes.py_map_records, py_table, 40, 0, bytes(damaged), header.base_offset, count, 0, 2**62
        )
        c = outcome(native_map, c_table, 40, 0, bytes(damaged), header.base_offset, count, 0, 2**62)
        assert (py, py_table) == (c, c_table)
        args = (
            py_table,
            passes.HASHED,
            bytes(damaged),
            header.base_offset,
            count,
            10,
            None,
            None,
            5,
            6,
            2**62,
        )
        py_f = outcome(passes.py_filter_records, *args)
        assert py_f == outcome(native_filter, *args)
        errors += isinstance(py, tuple) and py[0] == "ValueError"
    assert errors > 100


@compiled
def test_both_twins_agree_on_log_append_time_and_existing_horizons() -> None:
    from logtrove.records import NewRecord

    records = [
        NewRecord(None if i % 3 == 0 else b"v%d" % i, b"k%d" % (i % 4), (), 1_000 + i) for i in range(12)
    ]
    data = build_batch(records, base_offset=100, log_append_time=True)
    header = read_header(data)
    payload = bytes(data[HEADER_SIZE:])
    table = bytearray(24 * 40)
    passes.py_map_records(table, 30, 0, payload, 100, 12, 0, 2**62)
    assert passes.NATIVE is not None
    for append_ts, horizon, now in [(9_999, None, 0), (9_999, 50, 10), (9_999, 50, 60), (None, 2**62, 0)]:
        args = (
            table,
            passes.HASHED,
            payload,
            100,
            12,
            header.base_timestamp,
            append_ts,
            horizon,
            now,
            now + 7,
            105,
        )
        assert passes.py_filter_records(*args) == passes.NATIVE.filter_records(*args)


def test_the_map_file_layout_is_read_by_the_copy_pass(tmp_path: Path) -> None:
    path = tmp_path / "m.bin"
    write_offset_map_file(path, [(b"a", 5), (b"b", 7)], 10)
    lookup = OffsetMapFile(path)
    assert lookup.latest(b"a") == 5
    lookup.close()
    table = path.read_bytes()
    assert passes._latest(table, passes.SORTED, passes.xxhash.xxh3_128_digest(b"b")) == 7
    assert passes._latest(table, passes.SORTED, passes.xxhash.xxh3_128_digest(b"c")) is None


def test_a_cleaned_log_holds_valid_batches_and_whole_survivors_byte_for_byte(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    write_keyed(log, Model(), random.Random(6), clock, 200, keys=60, tombstone_share=0.0)
    log.roll()
    original = {h.base_offset: bytes(data) for h, data in log.batches()}
    Cleaner(storage).clean_until_caught_up(log)
    copied = rebuilt = 0
    for header, data in log.batches():
        assert validate_batch(data) == header
        before = read_header(original[header.base_offset])
        if header.record_count == before.record_count:
            assert bytes(data) == original[header.base_offset]
            copied += 1
        else:
            assert (header.last_offset_delta, header.compression) == (
                before.last_offset_delta,
                before.compression,
            )
            rebuilt += 1
    assert copied and rebuilt
    storage.close()


CLEAN_SCRIPT = """
import sys
from logtrove.storage import Storage
from logtrove.storage.cleaner import Cleaner, passes
from logtrove.testing import FakeClock
storage = Storage.open(sys.argv[1], clock=FakeClock(int(sys.argv[2])))
Cleaner(storage, map_budget_bytes=24 * 30).clean_until_caught_up(storage.log("c", 0))
storage.close()
print(passes.IMPLEMENTATION)
"""


@compiled
def test_the_compiled_and_python_cleaners_write_the_same_segments(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    write_keyed(log, Model(), random.Random(12), clock, 150, keys=40, tombstone_share=0.2)
    log.roll()
    storage.close()
    logs = []
    for implementation in ("compiled", "python"):
        copy = tmp_path / implementation
        shutil.copytree(tmp_path / "d", copy)
        env = {**os.environ, "LOGTROVE_PURE_PYTHON": "1" if implementation == "python" else "0"}
        ran = subprocess.run(
            [sys.executable, "-c", CLEAN_SCRIPT, str(copy), str(clock.now_ms())],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert ran.stdout.split() == [implementation]
        logs.append({p.name: p.read_bytes() for p in sorted((copy / "c-0").glob("*.log"))})
    assert logs[0] == logs[1]
    assert sum(map(len, logs[0].values())) < sum(
        p.stat().st_size for p in (tmp_path / "d" / "c-0").glob("*.log")
    )


@compiled
def test_both_twins_agree_when_a_large_batch_fills_the_map_stops_at_the_limit_or_breaks() -> None:
    """Batches of 100 records span several of the compiled passes' groups of 16: a full
    map, the round's limit and a damaged record may fall anywhere among them."""
    from logtrove.records import NewRecord

    assert passes.NATIVE is not None
    native_map, native_filter = passes.NATIVE.map_records, passes.NATIVE.filter_records
    rng = random.Random(21)
    for trial in range(300):
        records = [
            NewRecord(None if rng.random() < 0.1 else b"v", b"k%d" % rng.randrange(60), (), 1_000 + i)
            for i in range(100)
        ]
        payload = bytearray(build_batch(records, base_offset=1_000)[HEADER_SIZE:])
        if trial % 2:
            payload[rng.randrange(len(payload))] = rng.randrange(256)
        capacity = rng.choice([5, 30, 1000])
        limit = rng.choice([2**62, 1_000 + rng.randrange(100)])
        tables = [bytearray(24 * 1200), bytearray(24 * 1200)]
        py = outcome(passes.py_map_records, tables[0], capacity, 0, bytes(payload), 1_000, 100, 1_010, limit)
        c = outcome(native_map, tables[1], capacity, 0, bytes(payload), 1_000, 100, 1_010, limit)
        assert (py, tables[0]) == (c, tables[1])
        args = (tables[0], passes.HASHED, bytes(payload), 1_000, 100, 1_000, None, None, 5, 6, limit)
        assert outcome(passes.py_filter_records, *args) == outcome(native_filter, *args)
