"""Crash safety: a writer killed with SIGKILL at random moments loses no acknowledged batch
and leaves no partial one; damaged index files are rebuilt; a damaged log tail is cut."""

from __future__ import annotations

import os
import random
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logtrove.records import (
    Compression,
    NewRecord,
    build_batch,
    iter_records,
    peek_batch_size,
    validate_batch,
)
from logtrove.storage import Storage
from logtrove.storage.index import OffsetIndex, TimeIndex
from logtrove.testing import FakeClock

from .crash_writer import sequence_batch
from .helpers import TOPIC, as_tuple, decode_batches, expected_tuples, open_topic, random_records

# -- a writer process killed at random moments ----------------------------------------------


def run_and_kill(path: Path, first: int, rng: random.Random, mode: str) -> list[tuple[int, int, int]]:
    """Start a writer at sequence ``first``, SIGKILL it at a random moment, and return the
    (n, base offset, last offset) of every batch it acknowledged."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.crash_writer", str(path), str(first), mode],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    out = b""
    if rng.random() < 0.2:  # anywhere, startup and recovery included
        time.sleep(rng.uniform(0, 0.6))
    else:  # after some acknowledgements, mid-append most likely
        wanted = rng.randint(1, 60)
        deadline = time.monotonic() + 60
        while out.count(b"\n") < wanted and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                out += chunk
        time.sleep(rng.uniform(0, 0.005))
    proc.send_signal(signal.SIGKILL)
    while chunk := os.read(fd, 65536):
        out += chunk
    proc.stdout.close()
    proc.wait(timeout=30)
    assert proc.returncode in (-signal.SIGKILL, None), proc.returncode
    lines = out.split(b"\n")[:-1]  # a line without its newline was not acknowledged
    return [tuple(int(x) for x in line.split()) for line in lines]  # type: ignore[misc]


def check_log_files(directory: Path) -> None:
    """Every .log file is whole valid batches back to back, nothing after the last."""
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            size = peek_batch_size(data, pos)
            assert size is not None and pos + size <= len(data), f"partial batch in {path.name} at {pos}"
            validate_batch(data[pos : pos + size])
            pos += size


@pytest.mark.parametrize(("mode", "kills"), [("plain", 22), ("retention", 12)])
def test_sigkilled_writer_loses_no_acknowledged_batch(tmp_path: Path, mode: str, kills: int) -> None:
    """With ``retention`` the writer also deletes old segments as it goes, so kills land in
    deletions and checkpoint writes too; acknowledged batches may then be gone, but only
    below the log start offset."""
    rng = random.Random(f"20261122{mode}")
    path = tmp_path / "data"
    acked: dict[int, tuple[int, int]] = {}
    next_n = 0
    done = highest_start = 0
    found: dict[int, tuple[int, int]] = {}
    started = time.monotonic()
    while done < kills and time.monotonic() - started < 240:
        acks = run_and_kill(path, next_n, rng, mode)
        for n, base, last in acks:
            acked[n] = (base, last)
        done += 1
        if not (path / "topics" / f"{TOPIC}.json").exists():
            continue  # killed before the topic existed
        storage = Storage.open(path)
        assert not (storage.clean_shutdown and acks), "a killed writer leaves no clean-shutdown marker"
        log = storage.log(TOPIC, 0)
        check_log_files(log.directory)
        assert not list(log.directory.glob("*.deleted"))
        # every batch in the log is the next of the sequence, whole, at the next offset
        expected_base = log.log_start_offset
        found = {}
        first_n = None
        for header, data in log.batches():
            validate_batch(data)
            assert header.base_offset == expected_base, "no gap, no duplicate"
            records = list(iter_records(data, 0, header))
            n = int(records[0].value.split(b":")[0])  # type: ignore[union-attr]
            first_n = n if first_n is None else first_n
            assert n == first_n + len(found), "batches follow the writer's sequence"
            want, _ = sequence_batch(n)
            assert [as_tuple(r) for r in records] == expected_tuples(want, header.base_offset)
            found[n] = (header.base_offset, header.last_offset)
            expected_base = header.next_offset
        assert log.log_end_offset == expected_base
        assert mode == "retention" or log.log_start_offset == 0
        highest_start = max(highest_start, log.log_start_offset)
        for n, where in acked.items():
            if where[1] < log.log_start_offset:
                assert mode == "retention"
            else:
                assert found.get(n) == where, f"acknowledged batch {n} at {where} is missing"
        # the log continues right after the last batch
        next_n = (first_n or 0) + len(found)
        records, codec = sequence_batch(next_n)
        result = log.append(build_batch(records, compression=codec))
        assert result.base_offset == expected_base
        acked[next_n] = (result.base_offset, result.last_offset)
        next_n += 1
        if rng.random() < 0.5:
            storage.close()
        else:
            storage.abandon()  # the next writer recovers again
    assert done >= kills
    assert len(acked) > 2 * kills
    assert (highest_start > 0) == (mode == "retention")
    unacked = len([n for n in found if n not in acked])
    print(f"{done} kills, {len(acked)} acknowledged, {unacked} written but not acknowledged")


# -- damaged index files ---------------------------------------------------------------------


def build_log(path: Path, clock: FakeClock, rng: random.Random) -> list[tuple[object, ...]]:
    storage, log = open_topic(path, clock, segment_bytes="4096", index_interval_bytes="300")
    expected: list[tuple[object, ...]] = []
    for _ in range(150):
        records = random_records(rng, rng.randint(1, 6), clock.now_ms(), max_value=150)
        result = log.append(build_batch(records, compression=rng.choice(list(Compression))))
        expected += expected_tuples(records, result.base_offset)
        clock.advance(rng.randint(0, 5000))
    assert len(log.segments) > 5
    storage.close()
    return expected


def check_reads_back(path: Path, clock: FakeClock, expected: list[tuple[object, ...]]) -> None:
    """Every offset reads back, by offset and by time, from a writer and from a reader."""
    with Storage.open(path, clock=clock) as storage:
        log = storage.log(TOPIC, 0)
        for offset in range(len(expected)):
            batches = list(decode_batches(log.read(offset, 1).data()))
            base, last, records = batches[0]
            assert base <= offset <= last
            assert as_tuple(records[offset - base]) == expected[offset]
        for target in [*sorted({e[1] for e in expected})[::3], 0, 2**50]:
            want = next(((e[0], e[1]) for e in expected if e[1] >= target), None)  # type: ignore[operator]
            got = log.offset_for_timestamp(target)  # type: ignore[arg-type]
            assert (None if got is None else (got.offset, got.timestamp)) == want
        top = max(e[1] for e in expected)  # type: ignore[type-var]
        assert log.max_timestamp_offset() == log.offset_for_timestamp(top)  # type: ignore[arg-type]
        assert log.max_timestamp == top
        for seg in log.segments:
            check_index_files(seg.log_path)
    reader = Storage.open(path, read_only=True)
    assert [as_tuple(r) for r in reader.log(TOPIC, 0).records()] == expected
    reader.close()


def check_index_files(log_path: Path) -> None:
    """The index files next to ``log_path`` load strictly and agree with the log."""
    base = int(log_path.name[:-4])
    data = log_path.read_bytes()
    index = OffsetIndex(log_path.with_suffix(".index"), base)
    index.load(len(data))
    for offset, position in index.entries():
        assert (
            validate_batch(data[position : position + peek_batch_size(data, position)]).base_offset == offset
        )  # type: ignore[operator]
    time_index = TimeIndex(log_path.with_suffix(".timeindex"), base)
    time_index.load(2**62)
    running = -1
    running_at = base
    pos = 0
    maxima: dict[int, tuple[int, int]] = {}
    while pos < len(data):
        header = validate_batch(data[pos : pos + peek_batch_size(data, pos)])  # type: ignore[operator]
        if header.max_timestamp > running:
            running, running_at = header.max_timestamp, header.base_offset
        maxima[header.base_offset] = (running, running_at)
        pos += header.size
    for ts, offset in time_index.entries():
        assert offset in maxima
        assert maxima[offset][0] == ts, "a time-index entry holds the largest timestamp so far"


def damage(path: Path, how: str, rng: random.Random) -> None:
    data = path.read_bytes()
    if how == "deleted":
        path.unlink()
    elif how == "emptied":
        path.write_bytes(b"")
    elif how == "cut-mid-entry":
        path.write_bytes(data[: max(len(data) - 3, 0)])
    elif how == "cut-to-half":
        entry = 8 if path.suffix == ".index" else 12
        path.write_bytes(data[: len(data) // entry // 2 * entry])
    elif how == "random-bytes":
        path.write_bytes(rng.randbytes(len(data) or 24))
    elif how == "zeroed":
        path.write_bytes(bytes(len(data) or 24))
    elif how == "entry-past-the-log":
        path.write_bytes(data + bytes.fromhex("7fffff00" * 3)[: 8 if path.suffix == ".index" else 12])
    elif how == "last-entry-shifted":
        if path.suffix == ".index" and len(data) >= 16:
            rel, position = struct.unpack(">II", data[-8:])
            path.write_bytes(data[:-8] + struct.pack(">II", rel, position + 1))
        elif len(data) >= 24:
            ts, rel = struct.unpack(">qI", data[-12:])
            path.write_bytes(data[:-12] + struct.pack(">qI", ts, rel + 1))
    elif how == "first-entry-repeated":
        path.write_bytes(data + data[: 8 if path.suffix == ".index" else 12])
    else:
        raise AssertionError(how)


DAMAGES = [
    "deleted",
    "emptied",
    "cut-mid-entry",
    "cut-to-half",
    "random-bytes",
    "zeroed",
    "entry-past-the-log",
    "first-entry-repeated",
    "last-entry-shifted",
]


@pytest.mark.parametrize("suffix", [".index", ".timeindex", "both"])
@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_index_files_are_rebuilt_and_every_offset_reads_back(
    tmp_path: Path, how: str, suffix: str
) -> None:
    rng = random.Random(f"{how}{suffix}")
    clock = FakeClock()
    expected = build_log(tmp_path, clock, rng)
    suffixes = [".index", ".timeindex"] if suffix == "both" else [suffix]
    for log_file in sorted((tmp_path / f"{TOPIC}-0").glob("*.log")):
        for s in suffixes:
            damage(log_file.with_suffix(s), how, rng)
    check_reads_back(tmp_path, clock, expected)


@pytest.mark.parametrize("how", ["deleted", "random-bytes", "cut-mid-entry"])
def test_damaged_indexes_after_a_crash_are_rebuilt(tmp_path: Path, how: str) -> None:
    rng = random.Random(how)
    clock = FakeClock()
    expected = build_log(tmp_path, clock, rng)
    (tmp_path / ".clean-shutdown").unlink()  # as if the writer had been killed
    for log_file in sorted((tmp_path / f"{TOPIC}-0").glob("*.log")):
        damage(log_file.with_suffix(rng.choice([".index", ".timeindex"])), how, rng)
    check_reads_back(tmp_path, clock, expected)


# -- damaged log tails ------------------------------------------------------------------------


def active_log_file(path: Path) -> Path:
    return sorted((path / f"{TOPIC}-0").glob("*.log"))[-1]


@pytest.mark.parametrize("clean", [True, False], ids=["clean-marker", "unclean"])
@pytest.mark.parametrize(
    "garbage",
    [b"\x00" * 100, b"\xff" * 7, b"garbage after the last batch" * 9, "half-batch"],
    ids=["zeros", "ff", "text", "half-batch"],
)
def test_garbage_after_the_last_batch_is_truncated_on_reopen(
    tmp_path: Path, garbage: bytes | str, clean: bool
) -> None:
    rng = random.Random(1)
    clock = FakeClock()
    expected = build_log(tmp_path, clock, rng)
    tail = active_log_file(tmp_path)
    good_size = tail.stat().st_size
    if garbage == "half-batch":
        batch = build_batch(random_records(rng, 5, clock.now_ms()))
        garbage = batch[: len(batch) // 2]
    assert isinstance(garbage, bytes)
    with tail.open("ab") as f:
        f.write(garbage)
    if not clean:
        (tmp_path / ".clean-shutdown").unlink()
    storage = Storage.open(tmp_path, clock=clock)
    log = storage.log(TOPIC, 0)
    assert tail.stat().st_size == good_size
    assert log.recovered_bytes_truncated == len(garbage)
    assert log.log_end_offset == len(expected)
    result = log.append(build_batch([NewRecord(b"after", None, (), clock.now_ms())]))
    assert result.base_offset == len(expected)
    storage.close()
    check_reads_back(tmp_path, clock, [*expected, (len(expected), clock.now_ms(), None, b"after", ())])


def test_corrupt_batch_in_the_middle_of_the_tail_segment_cuts_from_there(tmp_path: Path) -> None:
    rng = random.Random(2)
    clock = FakeClock()
    build_log(tmp_path, clock, rng)
    tail = active_log_file(tmp_path)
    data = bytearray(tail.read_bytes())
    positions = []
    pos = 0
    while pos < len(data):
        positions.append(pos)
        pos += peek_batch_size(data, pos)  # type: ignore[operator]
    assert len(positions) >= 3
    victim = positions[len(positions) // 2]
    data[victim + 70] ^= 0x01  # inside the records: the CRC no longer matches
    tail.write_bytes(bytes(data))
    (tmp_path / ".clean-shutdown").unlink()
    with Storage.open(tmp_path, clock=clock) as storage:
        assert tail.stat().st_size == victim
        log = storage.log(TOPIC, 0)
        assert (
            log.log_end_offset
            == validate_batch(bytes(data[positions[len(positions) // 2 - 1] : victim])).next_offset
        )
        check_log_files(log.directory)


def test_empty_segment_left_by_a_crash_mid_roll_is_dropped(tmp_path: Path) -> None:
    rng = random.Random(3)
    clock = FakeClock()
    expected = build_log(tmp_path, clock, rng)
    directory = tmp_path / f"{TOPIC}-0"
    bases = sorted(int(p.name[:-4]) for p in directory.glob("*.log"))
    # an empty file named like a segment in the middle, and leftovers of deletes and rewrites
    middle = bases[2] + 1
    (directory / f"{middle:020d}.log").write_bytes(b"")
    (directory / f"{bases[0]:020d}.log.deleted").write_bytes(b"old")
    (directory / f"{bases[1]:020d}.index.tmp").write_bytes(b"tmp")
    (tmp_path / ".clean-shutdown").unlink()
    check_reads_back(tmp_path, clock, expected)
    names = {p.name for p in directory.iterdir()}
    assert f"{middle:020d}.log" not in names
    assert not [n for n in names if n.endswith((".deleted", ".tmp"))]
