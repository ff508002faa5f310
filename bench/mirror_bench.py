"""Mirror benchmark: how fast ``logtrove mirror`` copies a local logtrove leader, and how
far it lags behind while the leader takes a sustained produce.

* **Catch-up:** a leader (``logtrove serve --no-indexer --no-cleaner``, a subprocess on
  127.0.0.1) holds ``RECORDS`` × 100 B in ``PARTITIONS`` partitions, produced by
  confluent-kafka (``linger.ms=5``, ``batch.size=1000000``, uncompressed); the mirror runs
  in this process (:class:`logtrove.mirror.Mirror`, ``once``) into a fresh data directory,
  timed from start to caught up: records/s and MB/s of batch bytes appended. Median of
  ``RUNS`` runs.
* **Lag under load:** the leader's produce rate while filling it is its maximum here;
  a producer then sends at half that rate for ``LOAD_SECONDS`` while the mirror follows
  (:class:`logtrove.mirror.MirrorThread`); every 0.2 s the records the mirror is behind
  (the leader's log ends by ListOffsets minus the mirror's, summed over partitions) and
  its replica lag time (what ``/metrics`` shows: ms since it last reached the high
  watermark it saw) are sampled: p50 / p99 / max. The records behind, divided by the
  produce rate, are the **recovery point**: how many milliseconds of acknowledged produce
  a failover to this (asynchronous) standby would lose.

Both run on one machine, so the leader, the producer and the mirror share its cores.
``BENCH_QUICK=1``: 100 k records, 3 s of load. Run: ``.venv/bin/python bench/mirror_bench.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from _common import percentile, pick, save
from logtrove.client import KafkaClient
from logtrove.mirror import Mirror, MirrorConfig, MirrorThread
from logtrove.storage import Storage
from logtrove.wire import ApiKey

RUNS = 3
RECORDS = pick(1_000_000, 100_000)
PARTITIONS = 4
VALUE = b"x" * 100
LOAD_SECONDS = pick(10, 3)
TOPIC = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_leader(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    code = "from logtrove.cli.main import main; main()"
    args = [sys.executable, "-c", code, "serve", "--data", str(data), "--listen", f"127.0.0.1:{port}"]
    log = (data.parent / "leader.log").open("wb")
    proc = subprocess.Popen([*args, "--no-http", "--no-indexer", "--no-cleaner"], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the leader did not start")


def produce(bootstrap: str, count: int, rate: float | None = None) -> float:
    """Produce ``count`` records (at ``rate`` records/s if given); returns records/s."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000})
    started = time.monotonic()
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value=VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if rate is not None and i % 1000 == 0:
            ahead = i / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    return count / (time.monotonic() - started)


def catch_up(bootstrap: str, tmp: Path, run: int) -> dict[str, float]:
    storage = Storage.open(tmp / f"mirror-{run}")
    try:
        mirror = Mirror(storage, MirrorConfig(source=bootstrap, topics=TOPIC, groups=False))
        started = time.monotonic()
        mirror.run(threading.Event(), once=True)
        elapsed = time.monotonic() - started
        mirror.close()
    finally:
        storage.close()
    return {
        "seconds": round(elapsed, 3),
        "records_per_s": round(mirror.stats.records / elapsed),
        "mb_per_s": round(mirror.stats.bytes / elapsed / 1e6, 1),
        "records": mirror.stats.records,
        "bytes": mirror.stats.bytes,
    }


def leader_ends(client: KafkaClient) -> list[int]:
    """The leader's log end offsets now (ListOffsets latest)."""
    parts = [{"partition_index": p, "timestamp": -1} for p in range(PARTITIONS)]
    body = {"replica_id": -1, "topics": [{"name": TOPIC, "partitions": parts}]}
    answer = client.request(ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions
    return [int(p.offset) for p in sorted(answer, key=lambda p: p.partition_index)]


def lag_under_load(bootstrap: str, tmp: Path, rate: float) -> dict[str, Any]:
    storage = Storage.open(tmp / "mirror-load")
    mirror = Mirror(storage, MirrorConfig(source=bootstrap, topics=TOPIC, groups=False))
    mirror.run(threading.Event(), once=True)  # caught up with what is there
    thread = MirrorThread(mirror)
    thread.start()
    samples_records: list[int] = []
    samples_ms: list[int] = []
    done = threading.Event()

    def sample() -> None:
        with KafkaClient(bootstrap) as client:
            while not done.is_set():
                ends = leader_ends(client)
                local = [storage.log(TOPIC, p).log_end_offset for p in range(PARTITIONS)]
                samples_records.append(sum(max(0, e - o) for e, o in zip(ends, local, strict=True)))
                samples_ms.append(max((r.lag_ms for r in mirror.lag()), default=0))
                done.wait(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    sent = produce(bootstrap, int(rate * LOAD_SECONDS), rate)
    time.sleep(1)
    done.set()
    sampler.join()
    thread.stop()
    storage.close()
    return {
        "target_rate": round(rate),
        "sent_rate": round(sent),
        "lag_records": {
            "p50": percentile(samples_records, 50),
            "p99": percentile(samples_records, 99),
            "max": max(samples_records),
        },
        "lag_ms": {
            "p50": percentile(samples_ms, 50),
            "p99": percentile(samples_ms, 99),
            "max": max(samples_ms),
        },
        # the recovery point: acknowledged produce a failover to this standby would lose
        "recovery_point_ms": {
            "p50": round(percentile(samples_records, 50) / sent * 1000, 1),
            "p99": round(percentile(samples_records, 99) / sent * 1000, 1),
            "max": round(max(samples_records) / sent * 1000, 1),
        },
        "samples": len(samples_records),
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="mirror-bench-") as name:
        tmp = Path(name)
        (tmp / "leader").mkdir()
        proc, bootstrap = start_leader(tmp / "leader" / "data")
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
            max_rate = produce(bootstrap, RECORDS)
            runs = [catch_up(bootstrap, tmp, run) for run in range(RUNS)]
            load = lag_under_load(bootstrap, tmp, max_rate / 2)
        finally:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(30)
    median = {k: statistics.median(r[k] for r in runs) for k in ("seconds", "records_per_s", "mb_per_s")}
    save(
        "mirror",
        {
            "records": RECORDS,
            "partitions": PARTITIONS,
            "value_bytes": len(VALUE),
            "leader_produce_records_per_s": round(max_rate),
            "catch_up": {"median": median, "runs": runs},
            "lag_under_half_max_produce": load,
        },
    )


if __name__ == "__main__":
    main()
