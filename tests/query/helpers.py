"""A random dataset for query tests and a brute-force oracle over it.

The dataset has keys with repeats (and null keys), client message IDs (some repeated,
some missing), an indexed header, tags, JSON and text values, out-of-order client
timestamps, several compressions, several segments and partitions. The oracle answers
every query by decoding every record of the log: what the index must agree with.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from logtrove.query import Message, MessageIdGenerator, Predicate
from logtrove.records import Compression, NewRecord, Record, build_batch
from logtrove.storage import Storage
from logtrove.testing import FakeClock

TOPIC = "events"
T0 = 1_763_800_000_000
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "order", "failed", "paid", "shipped", "refund"]
STATUSES = ["ok", "failed", "pending", "paid"]
TOPIC_CONFIG = {
    "segment.bytes": "120000",
    "index.headers": "user,region",
    "message.id.header": "id",
    "message.tag.header": "tag",
}


@dataclass
class Dataset:
    """What was written, for choosing query arguments."""

    path: Path
    partitions: int
    keys: list[bytes]
    ids: list[str]
    users: list[bytes]
    t_min: int
    t_max: int
    rare_token: str


def make_record(
    rng: random.Random, i: int, ids: MessageIdGenerator, clock: FakeClock, rare: str
) -> NewRecord:
    key = None if rng.random() < 0.05 else f"key-{rng.randrange(500)}".encode()
    headers: list[tuple[str, bytes | None]] = []
    if rng.random() < 0.9:
        headers.append(("id", ids.next_id().encode()))
    headers.append(("user", f"user-{rng.randrange(40)}".encode()))
    if rng.random() < 0.5:
        headers.append(("tag", rng.choice([b"TagA", b"TagB", b"TagC"])))
    if rng.random() < 0.1:
        headers.append(("region", None))
    ts = clock.now_ms() + rng.randrange(-5_000, 5_000)  # client clocks disagree
    clock.advance(rng.randrange(0, 40))
    kind = rng.random()
    if kind < 0.5:
        value: bytes | None = json.dumps(
            {
                "order": {"id": rng.randrange(10_000), "status": rng.choice(STATUSES)},
                "n": i,
                "tags": ["x", "y"],
            }
        ).encode()
    elif kind < 0.95:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 8)))
        value = f"{words} {rng.randrange(100_000)}".encode()
    elif kind < 0.97:
        value = bytes(rng.randrange(256) for _ in range(20))  # not UTF-8, most likely
    else:
        value = None
    if i % 997 == 0 and value is not None:
        value += f" {rare} ".encode()
    return NewRecord(value=value, key=key, headers=tuple(headers), timestamp=ts)


def write_dataset(
    path: Path, n: int, *, partitions: int = 3, seed: int = 7, segment_bytes: int | None = None
) -> Dataset:
    rng = random.Random(seed)
    clock = FakeClock(T0)
    ids = MessageIdGenerator(5, clock=clock)
    rare = "zqxjrare"
    storage = Storage.open(path, clock=clock)
    config = dict(TOPIC_CONFIG)
    if segment_bytes is not None:
        config["segment.bytes"] = str(segment_bytes)
    storage.create_topic(TOPIC, partitions, config)
    written = 0
    all_ids: list[str] = []
    codecs = [Compression.NONE, Compression.NONE, Compression.GZIP, Compression.ZSTD, Compression.LZ4]
    while written < n:
        count = min(rng.randrange(1, 60), n - written)
        records = [make_record(rng, written + j, ids, clock, rare) for j in range(count)]
        for r in records:
            for k, v in r.headers:
                if k == "id" and v is not None:
                    all_ids.append(v.decode())
        if rng.random() < 0.02 and all_ids:  # a retried produce: the same ID twice
            dup = rng.choice(all_ids)
            records.append(NewRecord(b"retry", b"key-1", (("id", dup.encode()),), clock.now_ms()))
        storage.log(TOPIC, rng.randrange(partitions)).append(
            build_batch(records, compression=rng.choice(codecs))
        )
        written += count
    storage.close()
    return Dataset(
        path,
        partitions,
        [f"key-{i}".encode() for i in range(0, 500, 7)],
        all_ids,
        [f"user-{i}".encode() for i in range(40)],
        T0 - 5_000,
        clock.now_ms() + 5_000,
        rare,
    )


# -- brute force ---------------------------------------------------------------------------
class Oracle:
    """Every record of the topic, decoded once."""

    def __init__(self, storage: Storage, topic: str = TOPIC) -> None:
        info = storage.topic(topic)
        self.topic = topic
        self.records: dict[int, list[Record]] = {
            p: list(storage.log(topic, p).records()) for p in range(info.partitions)
        }

    def all(self) -> Iterator[tuple[int, Record]]:
        for p, records in self.records.items():
            for r in records:
                yield p, r

    def newest_first(self, pred: object) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for p, records in self.records.items():
            out[p] = [r.offset for r in reversed(records) if pred(r)]  # type: ignore[operator]
        return out

    def oldest_first(self, pred: object) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for p, records in self.records.items():
            out[p] = [r.offset for r in records if pred(r)]  # type: ignore[operator]
        return out

    def content(
        self, predicate: Predicate, start: int | None = None, end: int | None = None
    ) -> dict[int, list[int]]:
        return self.oldest_first(
            lambda r: (
                (start is None or r.timestamp >= start)
                and (end is None or r.timestamp < end)
                and predicate.matches(r.value)
            )
        )


def by_partition(messages: list[Message]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for m in messages:
        out.setdefault(m.partition, []).append(m.offset)
    return out


def nonempty(d: dict[int, list[int]]) -> dict[int, list[int]]:
    return {p: v for p, v in d.items() if v}
