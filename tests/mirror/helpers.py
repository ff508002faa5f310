"""Helpers of the mirror tests: ``logtrove mirror --once`` in a subprocess, a mirror's data
directory served by a broker, and every raw batch of a partition as a broker's Fetch
answers carry it (to compare leader and mirror byte for byte). The leaders are fixtures,
in ``conftest.py``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from logtrove.client import KafkaClient, check
from logtrove.records import peek_batch_size, read_header
from logtrove.testing import BrokerProcess, cli_in, free_port
from logtrove.wire import ApiKey

DEADLINE_S = 60


def mirror_once(source: str, data: Path, topics: str, *extra: str) -> Any:
    """``logtrove mirror --once``; asserts it succeeded."""
    out = cli_in(
        data.parent, "mirror", "--from", source, "--topics", topics, "--data", str(data), "--once", *extra
    )
    assert out.returncode == 0, out.stderr
    return out


@contextlib.contextmanager
def served(data: Path) -> Iterator[BrokerProcess]:
    """The mirror's data directory served by a broker, to fetch from it like from the leader."""
    with BrokerProcess(data, free_port(), "--no-indexer", "--no-cleaner") as proc:
        yield proc


def offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(log start, log end) by ListOffsets."""
    with KafkaClient(bootstrap) as client:
        found = []
        for ts in (-2, -1):
            body = {
                "replica_id": -1,
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": ts}]}],
            }
            part = client.request(ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions[0]
            check(part.error_code, None, f"list offsets {topic}-{partition}")
            found.append(int(part.offset))
    return found[0], found[1]


def raw_batches(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    """Every batch of a partition from its log start to its end, as the broker sends
    them in Fetch answers (raw bytes, compressed as stored)."""
    start, end = offsets(bootstrap, topic, partition)
    out: list[bytes] = []
    position = start
    deadline = time.monotonic() + DEADLINE_S
    with KafkaClient(bootstrap) as client:
        while position < end:
            assert time.monotonic() < deadline, f"{topic}-{partition}: stuck at {position} of {end}"
            part = _fetch(client, topic, partition, position)
            data = bytes(part.records or b"")
            pos = 0
            while pos < len(data):
                size = peek_batch_size(data, pos)
                if size is None or size > len(data) - pos:
                    break
                header = read_header(data, pos)
                if header.last_offset >= position:
                    out.append(data[pos : pos + size])
                    position = header.last_offset + 1
                pos += size
    return out


def _fetch(client: KafkaClient, topic: str, partition: int, offset: int) -> Any:
    body = {
        "replica_id": -1,
        "max_wait": 100,
        "min_bytes": 1,
        "max_bytes": 4 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 4 << 20}
                ],
            }
        ],
        "forgotten_topics_data": [],
    }
    part = client.request(ApiKey.FETCH, 12, body).responses[0].partitions[0]
    check(part.error_code, None, f"fetch {topic}-{partition}@{offset}")
    return part


def same_partitions(leader: str, mirror: str, topic: str, partitions: int) -> list[list[bytes]]:
    """Asserts every partition's raw batches are equal at leader and mirror; returns them."""
    out = []
    for p in range(partitions):
        theirs, ours = raw_batches(leader, topic, p), raw_batches(mirror, topic, p)
        assert offsets_of(ours) == offsets_of(theirs), f"{topic}-{p}"
        assert ours == theirs, f"{topic}-{p}: batches differ"
        assert offsets(mirror, topic, p) == offsets(leader, topic, p)
        out.append(theirs)
    return out


def log_bytes(data: Path, topic: str, partition: int) -> bytes:
    """The bytes of a partition's segment files, in offset order (what a restart recovers)."""
    segments = sorted((data / f"{topic}-{partition}").glob("*.log"))
    return b"".join(s.read_bytes() for s in segments)


def offsets_of(batches: list[bytes]) -> list[tuple[int, int, int]]:
    """(base offset, last offset, record count) of each batch."""
    headers = [read_header(b) for b in batches]
    return [(h.base_offset, h.last_offset, h.record_count) for h in headers]
