"""A mixed-tag topic built fast (prebuilt batches appended through storage, not the
broker), and brute-force answers to compare the index-based ones with."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from logtrove.groups.tags import TagFilter
from logtrove.records import Compression, NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.storage.derived.indexer import Indexer
from logtrove.testing import FakeClock

TOPIC = "mixed"
TAGS = [b"TagA", b"TagB", b"TagC", b"TagD"]
T0 = 1_763_800_000_000


@dataclass
class MixedTopic:
    """What was written: the tag of every offset, per partition (``None``: untagged)."""

    path: Path
    tags: dict[int, list[bytes | None]] = field(default_factory=dict)

    def count(self, partition: int, wanted: TagFilter, start: int, end: int | None = None) -> int:
        """Brute force from what was written."""
        tags = self.tags[partition]
        return sum(wanted.matches(t) for t in tags[start : len(tags) if end is None else end])


def prebuilt_batches(
    rng: random.Random, kinds: int, per_batch: int, *, tags: list[bytes] = TAGS
) -> list[tuple[bytes, list[bytes | None]]]:
    """``kinds`` distinct batches of ``per_batch`` records: random tags (a few untagged,
    a few with two tag headers where the last counts), some compressed."""
    out = []
    for k in range(kinds):
        records, kinds_tags = [], []
        for i in range(per_batch):
            roll = rng.random()
            tag = None if roll < 0.05 else rng.choice(tags)
            headers: tuple[tuple[str, bytes | None], ...] = (("id", f"{k}-{i}".encode()),)
            if tag is not None:
                headers += (("tag", tag),)
                if roll > 0.98:
                    headers = (("tag", rng.choice(tags)), *headers)  # an earlier tag header: ignored
            records.append(NewRecord(b"v%d" % i, b"k%d" % (i % 7), headers, T0 + k * 1000 + i))
            kinds_tags.append(tag)
        codec = Compression.ZSTD if k % 3 == 2 else Compression.NONE
        out.append((build_batch(records, compression=codec), kinds_tags))
    return out


def append_mixed(
    log: PartitionLog, batches: list[tuple[bytes, list[bytes | None]]], count: int, rng: random.Random
) -> list[bytes | None]:
    """Append ``count`` batches chosen at random from ``batches``; their tags in order."""
    written: list[bytes | None] = []
    for _ in range(count):
        data, tags = rng.choice(batches)
        log.append(data)
        written += tags
    return written


def write_mixed_topic(
    path: Path,
    *,
    partitions: int = 2,
    batches_per_partition: int = 40,
    per_batch: int = 250,
    segment_bytes: int = 256 * 1024,
    index: bool = True,
    block_records: int = 4096,
    seed: int = 3,
) -> MixedTopic:
    """A topic of ``partitions × batches_per_partition × per_batch`` records, indexed
    (with small blocks, so ranges cut through blocks) unless ``index=False``."""
    rng = random.Random(seed)
    batches = prebuilt_batches(rng, 12, per_batch)
    topic = MixedTopic(path)
    with Storage.open(path, clock=FakeClock(T0)) as storage:
        storage.create_topic(TOPIC, partitions, {"segment.bytes": str(segment_bytes)})
        for p in range(partitions):
            topic.tags[p] = append_mixed(storage.log(TOPIC, p), batches, batches_per_partition, rng)
        if index:
            Indexer(storage, block_records=block_records).catch_up()
    return topic
