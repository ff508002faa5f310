"""Topic histogram benchmark: records per time bucket over a large topic's whole retention.

Workload: N records over 4 partitions (64 MiB segments, the default 4 KiB index interval),
~100-byte values, batches of 200 records (a third of them zstd-compressed), timestamps
increasing by 0–520 ms (about 30 days for 10 M records). Full: 10 M records;
``BENCH_QUICK=1``: 400 k; ``BENCH_HISTOGRAM_RECORDS=N`` overrides both.

Measured (p50 / p99 over repeated runs, the storage opened read-only as ``logtrove http``
does, so nothing is cached beyond the loaded sparse indexes and the OS page cache):

* ``histogram()`` itself for the whole retention with auto buckets (≤ 200), hour buckets,
  and minute buckets over one day (1 440 buckets);
* the HTTP answer (``GET /api/v1/topics/t/histogram``) end to end through a real socket;
* the same count by brute force (every record decoded) once, for the ratio, on a
  partition only (it is slow), scaled.

The counts are checked against the log: the buckets add up to the records written.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from _common import pick, save, summary_us
from logtrove.http import start_in_thread
from logtrove.query import histogram, pick_bucket, topic_span
from logtrove.records import Compression, NewRecord, build_batch
from logtrove.storage import Storage

PARTITIONS = 4
BATCH = 200
T0 = 1_767_225_600_000
RUNS = 30


def records_wanted() -> int:
    override = os.environ.get("BENCH_HISTOGRAM_RECORDS")
    return int(override) if override else pick(10_000_000, 400_000)


def write(path: Path, n: int) -> float:
    rng = random.Random(7)
    values = [bytes(rng.choice(b"abcdefghij ") for _ in range(100)) for _ in range(64)]
    began = time.perf_counter()
    with Storage.open(path) as storage:
        storage.create_topic("t", PARTITIONS, {"segment.bytes": str(64 << 20)})
        logs = [storage.log("t", p) for p in range(PARTITIONS)]
        ts = [T0] * PARTITIONS
        per = n // PARTITIONS
        for p, log in enumerate(logs):
            for start in range(0, per, BATCH):
                records = []
                for _ in range(min(BATCH, per - start)):
                    ts[p] += rng.randint(0, 520 * PARTITIONS) // PARTITIONS
                    records.append(NewRecord(values[rng.randrange(64)], None, (), ts[p]))
                codec = Compression.ZSTD if (start // BATCH) % 3 == 0 else Compression.NONE
                log.append(build_batch(records, compression=codec))
    return time.perf_counter() - began


def timed(fn: Any, runs: int = RUNS) -> tuple[dict[str, float], Any]:
    samples, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t)
    return summary_us(samples), result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    n = records_wanted()
    tmp = Path(tempfile.mkdtemp(prefix="histogram-bench-"))
    results: dict[str, Any] = {"records": n, "partitions": PARTITIONS, "batch_records": BATCH}
    try:
        results["write_s"] = round(write(tmp / "data", n), 1)
        storage = Storage.open(tmp / "data", read_only=True)
        try:
            logs = [storage.log("t", p) for p in range(PARTITIONS)]
            results["segments"] = sum(len(log.segments) for log in logs)
            results["bytes"] = sum(log.size_bytes for log in logs)
            span = topic_span(logs)
            assert span is not None
            results["span_days"] = round((span[1] - span[0]) / 86_400_000, 1)
            middle = (span[0] + span[1]) // 2
            day = (middle - 43_200_000, middle + 43_200_000)
            plans = {
                "auto": pick_bucket(*span, "auto", 200),
                "hour": pick_bucket(*span, "hour", 2000),
                "minute_one_day": pick_bucket(*day, "minute", 2000),
            }
            for name, plan in plans.items():
                stats, found = timed(lambda plan=plan: histogram(logs, plan.edges))
                results[f"histogram_{name}"] = {
                    **stats,
                    "buckets": len(plan.edges) - 1,
                    "bucket": plan.unit,
                    "batches_scanned": found.batches_scanned,
                }
                if name != "minute_one_day":
                    assert sum(found.counts) == n, (name, sum(found.counts), n)
            server = start_in_thread(storage, f"127.0.0.1:{free_port()}", refresh_interval_s=3600)
            try:
                with httpx.Client(base_url=server.url, timeout=60) as client:
                    url = "/api/v1/topics/t/histogram"
                    client.get(url).raise_for_status()
                    stats, response = timed(lambda: client.get(url))
                    body = response.json()
                    results["http_auto"] = {
                        **stats,
                        "buckets": len(body["buckets"]),
                        "server_ms": body["elapsed_ms"],
                    }
                    assert body["records"] == n
            finally:
                server.stop()
            one = logs[0]
            t = time.perf_counter()
            brute = sum(1 for _ in one.records())
            brute_s = (time.perf_counter() - t) * PARTITIONS
            results["brute_force_decode_all_s_estimated"] = round(brute_s, 1)
            assert brute == one.log_end_offset
        finally:
            storage.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save("histogram", results)


if __name__ == "__main__":
    main()
