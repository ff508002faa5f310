"""Crash safety of compaction: a crash between any two steps of the swap, or a SIGKILL of
a cleaning process, loses and duplicates nothing, and the next round completes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logtrove.storage import PartitionLog, Storage
from logtrove.storage.cleaner import Cleaner, first_uncleanable_offset
from logtrove.testing import FakeClock

from .helpers import Model, open_compacted, write_keyed

SWAP_STEPS = ["manifest-written", "swap-committed", "old-deleted", "renamed-final"]


class CrashError(Exception):
    """Raised by the fault hook to stop a swap half-way."""


def snapshot(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in log.records()]


def assert_is_a_valid_compaction(before: list, after: list, model: Model, below: int) -> None:
    """Every record after is one of before (same offset and content), no duplicates, and
    every key's latest record is still there."""
    assert len({o for o, _, _ in after}) == len(after)
    original = {o: (k, v) for o, k, v in before}
    assert all(original[o] == (k, v) for o, k, v in after)
    present = {o for o, _, _ in after}
    for offset, _value, _ts in model.latest.values():
        assert offset in present or offset >= below


@pytest.mark.parametrize("step", SWAP_STEPS)
def test_crash_between_swap_steps_loses_nothing(tmp_path: Path, step: str) -> None:
    clock = FakeClock()
    storage, log = open_compacted(tmp_path / "d", clock)
    model = Model()
    write_keyed(log, model, random.Random(7), clock, 150, keys=20, tombstone_share=0.0)
    log.roll()
    before = snapshot(log)
    below = first_uncleanable_offset(log, clock.now_ms())

    def fault(at: str) -> None:
        if at == step:
            raise CrashError(at)

    with pytest.raises(CrashError):
        Cleaner(storage).clean(log, fault=fault)
    storage.abandon()
    leftovers = sorted(
        p.name for p in (tmp_path / "d" / "c-0").iterdir() if p.suffix in (".swap", ".cleaned")
    )
    assert leftovers or step == "renamed-final"

    storage, log = open_compacted(tmp_path / "d", clock)
    after = snapshot(log)
    assert_is_a_valid_compaction(before, after, model, below)
    assert not [p for p in (tmp_path / "d" / "c-0").iterdir() if p.suffix in (".swap", ".cleaned")]
    # the next rounds complete and give the fully compacted log
    stats = Cleaner(storage).clean_until_caught_up(log)
    assert stats[-1].first_dirty_after >= stats[-1].first_uncleanable
    final = snapshot(log)
    assert_is_a_valid_compaction(before, final, model, below)
    keys_below = [k for o, k, _ in final if o < below]
    assert len(keys_below) == len(set(keys_below))  # one record per key in the cleaned part
    storage.close()


CLEAN_SCRIPT = """
import sys
from logtrove.storage import Storage
from logtrove.storage.cleaner import Cleaner
storage = Storage.open(sys.argv[1])
log = storage.log("c", 0)
print("ready", flush=True)
Cleaner(storage, map_budget_bytes=24 * 6).clean_until_caught_up(log)
storage.close()
print("done", flush=True)
"""


def test_sigkill_of_a_cleaning_process_loses_nothing(tmp_path: Path) -> None:
    clock = FakeClock()
    data = tmp_path / "d"
    storage, log = open_compacted(data, clock)
    model = Model()
    write_keyed(log, model, random.Random(9), clock, 600, keys=60, tombstone_share=0.0)
    log.roll()
    original = snapshot(log)
    below = first_uncleanable_offset(log, clock.now_ms())
    storage.close()
    rng = random.Random(1)
    kills = 0
    deadline = time.monotonic() + 60
    while kills < 8 and time.monotonic() < deadline:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLEAN_SCRIPT, str(data)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        kills += 1
        storage = Storage.open(data)
        assert_is_a_valid_compaction(original, snapshot(storage.log("c", 0)), model, below)
        storage.close()
    storage = Storage.open(data)
    log = storage.log("c", 0)
    Cleaner(storage).clean_until_caught_up(log)
    final = snapshot(log)
    assert_is_a_valid_compaction(original, final, model, below)
    assert len([o for o, _, _ in final if o < below]) == len(
        [o for o, _, _ in model.latest.values() if o < below]
    )
    storage.close()
    assert kills >= 1
