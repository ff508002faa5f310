"""What a topic's ``compression.type`` costs on the produce path, and whether it stalls
the broker's event loop.

1. **Per batch** (in this process, a real data directory): batches of 1,000 records of
   ~110 B (a JSON order, a key), as librdkafka sends them under load, compressed lz4
   (librdkafka's usual choice) or not at all. For each setting (``producer`` and the five
   codecs) it times :func:`~logtrove.records.recompress_batch` alone and
   :meth:`PartitionLog.append` (validation and recompression included), best of 3 passes,
   and reports the stored batch size. ``extra_us`` = append − append under ``producer``.
2. **Loop lag** (in this process, asyncio): a task appends those lz4 batches to a
   ``gzip`` / ``zstd`` topic, recompressing either on the loop (a plain ``append``) or in
   a worker thread first (``asyncio.to_thread(log.recompressed)`` then ``append``, what
   the broker does), while a ticker sleeps 1 ms at a time and records how late it wakes:
   the time any other connection would wait.
3. **Broker** (a ``logtrove serve`` subprocess): one connection produces those lz4
   batches at a fixed 100 batches/s (100,000 records/s, acks=1) to a ``producer`` topic,
   then to a ``gzip`` and a ``zstd`` one, while another sends ApiVersions every 2 ms and
   times each answer.

Full size: 200 batches per case, 8 s per broker run; ``BENCH_QUICK=1``: 40 and 3 s.
Shared 2-core VM: tails (p99, max) are noisy; compare settings within one run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import pick, save, summary_us
from logtrove.client import KafkaClient
from logtrove.records import Compression, NewRecord, build_batch, recompress_batch
from logtrove.storage import Storage
from logtrove.storage.config import COMPRESSION_TYPES, TopicConfig
from logtrove.wire import ApiKey

BATCHES = pick(200, 40)
PROBE_S = pick(8, 3)
RECORDS_PER_BATCH = 1000
PRODUCE_RATE = 100  # batches/s in the broker run: below what every setting sustains


def value(i: int) -> bytes:
    return (
        b'{"order": %d, "user": "u-%06d", "status": "paid", "amount": %d.90, "currency": "EUR", "pad": "xx"}'
        % (4_700_000 + i, i % 50_000, i % 997)
    )


def batch(n: int, codec: Compression) -> bytes:
    records = [
        NewRecord(value(n * RECORDS_PER_BATCH + i), b"k%d" % (i % 64)) for i in range(RECORDS_PER_BATCH)
    ]
    return build_batch(records, compression=codec)


def best_us(fn: Any, data: list[bytes]) -> float:
    """Best of three passes over every batch, in µs per batch."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for b in data:
            fn(b)
        best = min(best, time.perf_counter() - started)
    return best / len(data) * 1e6


def append_us(setting: str, data: list[bytes]) -> tuple[float, int]:
    """µs per append of ``data`` to a topic with ``compression.type=setting`` (best of
    three passes, each into a fresh topic) and the bytes the log then holds per batch."""
    folder = Path(tempfile.mkdtemp(prefix="logtrove-bench-recompress-"))
    best, size = float("inf"), 0
    try:
        with Storage.open(folder / "data") as storage:
            for attempt in range(3):
                topic = f"t{attempt}"
                storage.create_topic(topic, 1, {"compression.type": setting, "segment.bytes": str(2**30)})
                log = storage.log(topic, 0)
                started = time.perf_counter()
                for b in data:
                    log.append(b)
                best = min(best, time.perf_counter() - started)
                size = log.size_bytes // len(data)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return best / len(data) * 1e6, size


def per_batch(source: Compression) -> list[dict[str, Any]]:
    data = [batch(n, source) for n in range(BATCHES)]
    raw = len(batch(0, Compression.NONE))
    rows = []
    baseline = None
    for setting in COMPRESSION_TYPES:
        target = TopicConfig(compression_type=setting).compression
        recompress = 0.0
        if target is not None and target is not source:
            recompress = best_us(lambda b, t=target: recompress_batch(b, t), data)
        append, stored = append_us(setting, data)
        baseline = append if baseline is None else baseline
        row = {
            "source": source.name.lower(),
            "compression_type": setting,
            "recompress_us": round(recompress, 1),
            "append_us": round(append, 1),
            "extra_us": round(append - baseline, 1),
            "stored_bytes": stored,
            "stored_share": round(stored / raw, 3),
        }
        print(row, flush=True)
        rows.append(row)
    return rows


# ── loop lag ───────────────────────────────────────────────────────────────────


async def lag_run(setting: str, off_loop: bool, data: list[bytes]) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="logtrove-bench-recompress-lag-"))
    lags: list[float] = []
    try:
        with Storage.open(folder / "data") as storage:
            storage.create_topic("t", 1, {"compression.type": setting, "segment.bytes": str(2**30)})
            log = storage.log("t", 0)
            done = asyncio.Event()

            async def ticker() -> None:
                while not done.is_set():
                    started = time.perf_counter()
                    await asyncio.sleep(0.001)
                    lags.append(max(0.0, time.perf_counter() - started - 0.001))

            async def producer() -> None:
                await asyncio.sleep(0.01)
                for b in data:
                    ready: bytes | bytearray | memoryview = b
                    if off_loop and log.recompresses(b):
                        ready = await asyncio.to_thread(log.recompressed, b)
                    log.append(ready)
                    await asyncio.sleep(0)
                done.set()

            started = time.perf_counter()
            await asyncio.gather(ticker(), producer())
            elapsed = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = {
        "compression_type": setting,
        "recompressed": "off the loop" if off_loop else "on the loop",
        **summary_us(lags),
    }
    out["max_us"] = round(max(lags) * 1e6, 1)
    out["batches_per_s"] = round(len(data) / elapsed, 1)
    print(out, flush=True)
    return out


def loop_lag() -> list[dict[str, Any]]:
    data = [batch(n, Compression.LZ4) for n in range(BATCHES)]
    rows = [asyncio.run(lag_run("producer", False, data))]
    for setting in ("gzip", "zstd"):
        for off_loop in (False, True):
            rows.append(asyncio.run(lag_run(setting, off_loop, data)))
    return rows


# ── broker ─────────────────────────────────────────────────────────────────────


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    code = "from logtrove.cli.main import main; main()"
    args = [sys.executable, "-c", code, "serve", "--data", str(data), "--listen", f"127.0.0.1:{port}"]
    log = (data.parent / "broker.log").open("wb")
    proc = subprocess.Popen([*args, "--no-http", "--no-indexer", "--no-cleaner"], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    raise RuntimeError("the broker did not start")


def create_topic(bootstrap: str, name: str, setting: str) -> None:
    with KafkaClient(bootstrap) as client:
        resp = client.request(
            ApiKey.CREATE_TOPICS,
            4,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": "compression.type", "value": setting}],
                    }
                ],
                "timeout_ms": 10_000,
                "validate_only": False,
            },
        )
        assert resp.topics[0].error_code == 0, resp.topics[0]


def probe_run(bootstrap: str, topic: str, data: list[bytes]) -> dict[str, Any]:
    """Produce ``data`` at PRODUCE_RATE batches/s on one connection for PROBE_S seconds
    while another connection times ApiVersions every 2 ms."""
    stop = threading.Event()
    produced = [0]

    def produce() -> None:
        with KafkaClient(bootstrap) as client:
            i = 0
            start = time.monotonic()
            while not stop.is_set():
                stop.wait(max(0.0, start + i / PRODUCE_RATE - time.monotonic()))
                body = {
                    "acks": 1,
                    "timeout": 10_000,
                    "topic_data": [
                        {"name": topic, "partition_data": [{"index": 0, "records": data[i % len(data)]}]}
                    ],
                }
                part = client.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
                assert part.error_code == 0, part
                produced[0] += 1
                i += 1

    producer = threading.Thread(target=produce)
    producer.start()
    samples: list[float] = []
    try:
        with KafkaClient(bootstrap) as probe:
            time.sleep(0.5)  # the producer is running
            deadline = time.monotonic() + PROBE_S
            while time.monotonic() < deadline:
                started = time.perf_counter()
                probe.request(ApiKey.API_VERSIONS, 0, {})
                samples.append(time.perf_counter() - started)
                time.sleep(0.002)
    finally:
        stop.set()
        producer.join(30)
    out = {"topic_setting": topic.removeprefix("probe-"), **summary_us(samples)}
    out["max_us"] = round(max(samples) * 1e6, 1)
    out["batches_per_s"] = round(produced[0] / (PROBE_S + 0.5), 1)
    print(out, flush=True)
    return out


def broker_probe() -> list[dict[str, Any]]:
    folder = Path(tempfile.mkdtemp(prefix="logtrove-bench-recompress-loop-"))
    proc, bootstrap = start_broker(folder / "data")
    try:
        data = [batch(n, Compression.LZ4) for n in range(20)]
        rows = []
        for setting in ("producer", "gzip", "zstd"):
            create_topic(bootstrap, f"probe-{setting}", setting)
            rows.append(probe_run(bootstrap, f"probe-{setting}", data))
        return rows
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(folder, ignore_errors=True)


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in columns]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[c]).rjust(w) for c, w in zip(columns, widths, strict=True)))


def main() -> None:
    cases = per_batch(Compression.LZ4) + per_batch(Compression.NONE)
    lag = loop_lag()
    probe = broker_probe()
    save(
        "recompress",
        {
            "records_per_batch": RECORDS_PER_BATCH,
            "value_bytes": len(value(0)),
            "batches": BATCHES,
            "per_batch": cases,
            "loop_lag": lag,
            "broker_probe": probe,
        },
    )
    print()
    print_table(
        cases, ["source", "compression_type", "recompress_us", "append_us", "extra_us", "stored_bytes"]
    )
    print()
    print_table(lag, ["compression_type", "recompressed", "p50_us", "p99_us", "max_us", "batches_per_s"])
    print()
    print_table(probe, ["topic_setting", "p50_us", "p99_us", "max_us", "n", "batches_per_s"])


if __name__ == "__main__":
    main()
