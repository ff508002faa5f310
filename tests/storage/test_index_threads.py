"""An index appended to by one thread and flushed by another (the broker's maintenance
thread) keeps every entry exactly once, in order."""

from __future__ import annotations

import threading
from pathlib import Path

from logtrove.storage.index import OffsetIndex


def test_concurrent_flushes_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        while not stop.is_set():
            try:
                index.fsync()
            except BaseException as exc:  # pragma: no cover - the bug this test guards
                errors.append(exc)
                return

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(1, 100_000):
            index.append(i, i * 10)
    finally:
        stop.set()
        thread.join()
    index.flush()
    assert not errors
    data = index.path.read_bytes()
    entries = [index.ENTRY.unpack_from(data, pos) for pos in range(0, len(data), index.ENTRY.size)]
    assert entries == [(i, i * 10) for i in range(1, 100_000)]
