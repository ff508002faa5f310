"""Helpers for compaction tests: a keyed workload with an exact model of the result."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from logtrove.records import NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.testing import FakeClock

DAY = 86_400_000


@dataclass
class Model:
    """What each key's latest record is: offset, value (None = tombstone), timestamp."""

    latest: dict[bytes, tuple[int, bytes | None, int]] = field(default_factory=dict)
    all_offsets: list[int] = field(default_factory=list)

    def expected(self, below: int, tombstones_expired: bool) -> list[tuple[int, bytes, bytes | None]]:
        """The records a fully cleaned log holds below offset ``below``."""
        out = []
        for key, (offset, value, _ts) in self.latest.items():
            if offset >= below:
                continue
            if value is None and tombstones_expired:
                continue
            out.append((offset, key, value))
        return sorted(out)


def write_keyed(
    log: PartitionLog,
    model: Model,
    rng: random.Random,
    clock: FakeClock,
    batches: int,
    *,
    keys: int = 50,
    per_batch: int = 8,
    tombstone_share: float = 0.1,
) -> None:
    for _ in range(batches):
        records = []
        for _ in range(rng.randint(1, per_batch)):
            key = f"key-{rng.randrange(keys)}".encode()
            value = None if rng.random() < tombstone_share else rng.randbytes(rng.randint(0, 40))
            records.append(NewRecord(value, key, (("h", b"x"),), clock.now_ms() + rng.randint(-5000, 5000)))
        result = log.append(build_batch(records, compression=rng.choice([0, 0, 1, 4])))  # type: ignore[arg-type]
        for i, record in enumerate(records):
            assert record.key is not None and record.timestamp is not None
            model.latest[record.key] = (result.base_offset + i, record.value, record.timestamp)
            model.all_offsets.append(result.base_offset + i)
        clock.advance(rng.randint(0, 50))


def open_compacted(path: Path, clock: FakeClock, **configs: str) -> tuple[Storage, PartitionLog]:
    storage = Storage.open(path, clock=clock)
    if not storage.has_topic("c"):
        settings = {"cleanup.policy": "compact", "segment.bytes": "2048", "index.interval.bytes": "256"}
        settings.update(configs)
        storage.create_topic("c", 1, settings)
    return storage, storage.log("c", 0)
