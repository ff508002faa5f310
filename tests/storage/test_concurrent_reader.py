"""A read-only opening beside a live writer process: while the writer appends, rolls and
(in one variant) deletes old segments, every refresh and read sees whole, valid batches
with the content the writer wrote, at the offsets it acknowledged."""

from __future__ import annotations

import os
import random
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logtrove.records import iter_records
from logtrove.storage import Storage
from logtrove.testing import wait_until

from .crash_writer import TS0, sequence_batch
from .helpers import TOPIC, as_tuple, decode_batches, expected_tuples


def read_acks(fd: int, buffer: bytearray, timeout: float) -> list[tuple[int, int, int]]:
    ready, _, _ = select.select([fd], [], [], timeout)
    if ready:
        buffer += os.read(fd, 1 << 16)
    lines = bytes(buffer).split(b"\n")
    buffer[:] = lines[-1]
    return [tuple(int(x) for x in line.split()) for line in lines[:-1]]  # type: ignore[misc]


@pytest.mark.parametrize("mode", ["plain", "retention"])
def test_reader_beside_a_live_writer_sees_only_whole_acknowledged_batches(tmp_path: Path, mode: str) -> None:
    rng = random.Random(mode)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.crash_writer", str(tmp_path), "0", mode],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buffer = bytearray()
    acked: dict[int, tuple[int, int]] = {}

    def first_acks() -> bool:
        acked.update((n, (b, e)) for n, b, e in read_acks(fd, buffer, 10))
        return bool(acked)

    try:  # this wait had no deadline: a writer dead before its first ack spun here forever
        wait_until(first_acks, 30, interval_s=0, what="the writer's first acknowledgement")
        reader = Storage.open(tmp_path, read_only=True)
        log = reader.log(TOPIC, 0)
        last_end = 0
        reads = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            acked.update((n, (b, e)) for n, b, e in read_acks(fd, buffer, 0))
            known_end = max(e for _, e in acked.values()) + 1
            reader.refresh()
            start, end = log.log_start_offset, log.log_end_offset
            assert end >= known_end, (
                f"every batch acknowledged before the refresh is seen: segments "
                f"{[(s.base_offset, s.next_offset, s.size, s.file_size()) for s in log.segments]}, "
                f"on disk {sorted(p.name for p in log.directory.iterdir())}"
            )
            assert end >= last_end, (
                f"the log end never goes back: {last_end} -> {end}, segments {log.segments}, "
                f"on disk {sorted(p.name for p in log.directory.iterdir())}"
            )
            last_end = end
            if end == start:
                continue
            offset = rng.randrange(start, end)
            data = log.read(offset, rng.choice([1, 2000, 50_000])).data()
            batches = list(decode_batches(data))
            assert batches[0][0] <= offset <= batches[0][1]
            for base, last, records in batches:
                n = int(records[0].value.split(b":")[0])  # type: ignore[union-attr]
                want, _ = sequence_batch(n)
                assert [as_tuple(r) for r in records] == expected_tuples(want, base)
                if n in acked:
                    assert acked[n] == (base, last)
            found = log.offset_for_timestamp(TS0 + n)  # timestamps grow with n
            assert found is not None and found.offset == max(base, start)
            reads += 1
        assert reads > 20
        # acknowledged batches at or above the reader's log start are all there
        reader.refresh()
        by_base = {h.base_offset: h for h, _ in log.batches()}
        for n, (base, last) in acked.items():
            if base >= log.log_start_offset and base < log.log_end_offset:
                assert by_base[base].last_offset == last, n
        assert sum(1 for _h, data in log.batches() for _ in iter_records(data)) > 0
        reader.close()
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
