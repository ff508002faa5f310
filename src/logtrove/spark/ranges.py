"""Planning a read: which (topic, partition, offset range) slices a query covers.

A read is planned against a :class:`Catalog` — the data directory itself in direct mode
(:class:`DirectCatalog`), a broker in remote mode (``logtrove.spark.remote``). Planning
turns the options into one :class:`OffsetRange` per partition (offsets from the log
start/end, or from the time indexes for timestamp options), then splits the ranges at
segment boundaries and, if ``minPartitions`` asks for more, into equal pieces, so that
Spark gets independent tasks of similar size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol

from logtrove.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError, ReadOptions
from logtrove.storage import Storage
from logtrove.storage.txnview import committed_view


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition of one topic."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


class Catalog(Protocol):
    """What planning needs to know about the topics, wherever they are."""

    def topic_names(self) -> list[str]: ...

    def partition_count(self, topic: str) -> int: ...

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset)."""
        ...

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """First offset whose record timestamp is ≥ ``timestamp``; ``None`` if none."""
        ...

    def split_points(self, topic: str, partition: int) -> list[int]:
        """Offsets where a range may be cut cheaply (segment base offsets); may be empty."""
        ...

    def header_names(self, topic: str) -> tuple[str, str]:
        """The topic's (message.id.header, message.tag.header)."""
        ...


class DirectCatalog:
    """A catalog over a data directory opened read-only (safe while a broker writes).
    With ``read_committed`` (the default) a partition ends at its last stable offset
    (:mod:`logtrove.storage.txnview`), so ``latest`` never passes an open transaction and
    a stream's committed offsets never skip records that commit later."""

    def __init__(self, storage: Storage, *, read_committed: bool = True) -> None:
        self.storage = storage
        self.read_committed = read_committed

    def topic_names(self) -> list[str]:
        return [t.name for t in self.storage.topics()]

    def partition_count(self, topic: str) -> int:
        return self.storage.topic(topic).partitions

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        log = self.storage.log(topic, partition)
        if self.read_committed:
            return log.log_start_offset, committed_view(log).last_stable_offset
        return log.log_start_offset, log.log_end_offset

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        found = self.storage.log(topic, partition).offset_for_timestamp(timestamp)
        return None if found is None else found.offset

    def split_points(self, topic: str, partition: int) -> list[int]:
        return [seg.base_offset for seg in self.storage.log(topic, partition).segments]

    def header_names(self, topic: str) -> tuple[str, str]:
        config = self.storage.topic(topic).config
        return config.message_id_header, config.message_tag_header


def topic_partitions(options: ReadOptions, catalog: Catalog) -> list[tuple[str, int]]:
    """Every (topic, partition) the options cover, sorted."""
    out: list[tuple[str, int]] = []
    for topic in options.select_topics(catalog.topic_names()):
        count = catalog.partition_count(topic)
        wanted = options.assign[topic] if options.assign is not None else range(count)
        for p in wanted:
            if not 0 <= p < count:
                raise OptionError(f"assign: topic {topic} has partitions 0-{count - 1}, not {p}")
            out.append((topic, p))
    return sorted(out)


def _offset_from_spec(
    spec: OffsetSpec, topic: str, partition: int, bounds: tuple[int, int], default: int
) -> int:
    start, end = bounds
    if isinstance(spec, str):
        chosen = EARLIEST if spec == "earliest" else LATEST
    else:
        chosen = spec.get(topic, {}).get(partition, default)
    if chosen == EARLIEST:
        return start
    if chosen == LATEST:
        return end
    return min(max(chosen, start), end)


def _offset_from_time(
    catalog: Catalog,
    topic: str,
    partition: int,
    everywhere: int | None,
    per_partition: Mapping[str, Mapping[int, int]] | None,
) -> int | bool | None:
    """The offset for a timestamp option, ``None`` if no record is that late, or
    ``False`` when no timestamp option applies to this partition."""
    ts = everywhere
    if ts is None and per_partition is not None:
        ts = per_partition.get(topic, {}).get(partition)
    if ts is None:
        return False
    return catalog.offset_for_time(topic, partition, ts)


def start_offset(options: ReadOptions, catalog: Catalog, topic: str, partition: int) -> int:
    """Where a read of this partition begins."""
    bounds = catalog.bounds(topic, partition)
    by_time = _offset_from_time(
        catalog, topic, partition, options.starting_timestamp, options.starting_by_timestamp
    )
    if by_time is not False:
        return bounds[1] if by_time is None else int(by_time)
    return _offset_from_spec(options.starting_offsets, topic, partition, bounds, EARLIEST)


def end_offset(options: ReadOptions, catalog: Catalog, topic: str, partition: int) -> int:
    """Where a batch read of this partition ends (exclusive)."""
    bounds = catalog.bounds(topic, partition)
    by_time = _offset_from_time(
        catalog, topic, partition, options.ending_timestamp, options.ending_by_timestamp
    )
    if by_time is not False:
        return bounds[1] if by_time is None else int(by_time)
    return _offset_from_spec(options.ending_offsets, topic, partition, bounds, LATEST)


def plan_batch(options: ReadOptions, catalog: Catalog) -> list[OffsetRange]:
    """The offset ranges of a batch read, before splitting (empty ranges dropped)."""
    ranges = []
    for topic, p in topic_partitions(options, catalog):
        rng = OffsetRange(
            topic, p, start_offset(options, catalog, topic, p), end_offset(options, catalog, topic, p)
        )
        if rng.size:
            ranges.append(rng)
    return ranges


def split_ranges(
    ranges: list[OffsetRange], catalog: Catalog, min_partitions: int | None
) -> list[OffsetRange]:
    """Cut ranges at segment boundaries, then halve the largest piece until there are at
    least ``min_partitions`` pieces (or pieces are single offsets)."""
    pieces: list[OffsetRange] = []
    for rng in ranges:
        cuts = [c for c in catalog.split_points(rng.topic, rng.partition) if rng.start < c < rng.end]
        bounds = [rng.start, *cuts, rng.end]
        pieces.extend(OffsetRange(rng.topic, rng.partition, a, b) for a, b in pairwise(bounds))
    wanted = min_partitions or 0
    while 0 < len(pieces) < wanted:
        largest = max(pieces, key=lambda r: r.size)
        if largest.size < 2:
            break
        pieces.remove(largest)
        mid = largest.start + largest.size // 2
        pieces += [
            OffsetRange(largest.topic, largest.partition, largest.start, mid),
            OffsetRange(largest.topic, largest.partition, mid, largest.end),
        ]
    return sorted(pieces)
