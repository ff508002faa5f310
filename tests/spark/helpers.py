"""Building topics for the Spark tests through storage (no broker needed), and the
access-log lines the parsing tests read (one per shape the combined-log parser meets)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage

BASE_TS = 1_700_000_000_000
GOOGLEBOT = (
    '66.249.65.159 - - [06/Nov/2014:19:10:38 +0600] "GET /news/53f8d72920ba2744fe873ebc.html HTTP/1.1" 404 177 "-" '
    '"Mozilla/5.0 (iPhone; CPU iPhone OS 6_0 like Mac OS X) AppleWebKit/536.26 (KHTML, like Gecko) Version/6.0 '
    'Mobile/10A5376e Safari/8536.25 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"'
)
ACCESS_LINES = [
    GOOGLEBOT,
    '10.0.0.7 - alice [22/Nov/2026:03:04:05 +0000] "POST /api/orders?id=4711 HTTP/2.0" 201 5123 "https://shop.example/cart" "curl/8.5.0"',
    '192.168.1.20 - - [22/Nov/2026:03:04:06 +0000] "GET / HTTP/1.1" 304 - "-" "Mozilla/5.0 (X11; Linux x86_64)"',
    '203.0.113.9 - - [22/Nov/2026:03:04:07 +0000] "-" 400 0 "-" "-"',
    "this is not an access log line",
]


def record(i: int, *, keys: int = 10) -> NewRecord:
    headers: tuple[tuple[str, bytes | None], ...] = (
        ("id", f"m-{i}".encode()),
        ("tag", b"TagA" if i % 3 == 0 else b"TagB"),
    )
    return NewRecord(
        value=f'{{"n": {i}, "text": "order {i}"}}'.encode(),
        key=f"k{i % keys}".encode(),
        headers=headers,
        timestamp=BASE_TS + i * 1000,
    )


def jittered_ts(i: int) -> int:
    """Out of order within a partition: every 5th record is 3.5 s late, every 7th 2.5 s early."""
    return BASE_TS + 1000 * i + (3500 if i % 5 == 2 else 0) - (2500 if i % 7 == 3 else 0)


def jittered(i: int) -> NewRecord:
    """Record ``i`` of a topic whose timestamps are not monotonic (keys over 9 values)."""
    return NewRecord(
        value=f"v{i}".encode(),
        key=f"k{i % 9}".encode(),
        headers=(("id", f"m-{i}".encode()),),
        timestamp=jittered_ts(i),
    )


def make_topic(
    data: Path,
    topic: str,
    records: Iterable[NewRecord],
    *,
    partitions: int = 1,
    batch: int = 50,
    configs: dict[str, str] | None = None,
) -> None:
    """Append ``records`` round-robin over partitions in batches of ``batch``."""
    with Storage.open(data) as storage:
        if not storage.has_topic(topic):
            storage.create_topic(topic, partitions, configs or {"segment.bytes": "20000"})
        per_partition: dict[int, list[NewRecord]] = {}
        for i, rec in enumerate(records):
            per_partition.setdefault(i % partitions, []).append(rec)
        for p, recs in per_partition.items():
            log = storage.log(topic, p)
            for start in range(0, len(recs), batch):
                log.append(build_batch(recs[start : start + batch]))


def stored(
    data: Path, topic: str, start: int = 0, end: int | None = None
) -> list[tuple[int, int, bytes | None]]:
    """(partition, offset, value) of every record, via storage."""
    out = []
    with Storage.open(data, read_only=True) as storage:
        for p in range(storage.topic(topic).partitions):
            out += [(p, r.offset, r.value) for r in storage.log(topic, p).records(start, end)]
    return sorted(out)
