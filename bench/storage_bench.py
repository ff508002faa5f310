"""Storage benchmark: append, sequential read, lookups, recovery.

Measures, on a real data directory (in ``$BENCH_DIR`` or a temp dir next to the repo):

* append throughput of 100-byte records in 16 KiB and 1 MiB batches (page cache, one
  fsync at the end), and with an fsync after every 1 MiB batch (``flush.messages=1``);
  next to the machine's raw ``os.write`` + fsync of the same bytes;
* sequential read throughput through ``PartitionLog.read`` (1 MiB fetches);
* offset lookup and timestamp lookup latency (p50/p99) on the whole log;
* recovery time of the log after an unclean shutdown (every batch re-validated).

Full size: 10 M records (about 1.1 GB, one 1 GiB segment plus a tail). ``BENCH_QUICK=1``:
200 k records. Run: ``.venv/bin/python bench/storage_bench.py``.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile
import time
from pathlib import Path

import crc32c

from _common import pick, save, summary_us
from logtrove.records import NewRecord, build_batch, read_header
from logtrove.records.batch import CRC_START
from logtrove.storage import Storage
from logtrove.storage.checkpoint import RECOVERY_POINT
from logtrove.storage.datadir import CLEAN_SHUTDOWN_FILE

RECORD_VALUE = 100
TIMESTAMPS = struct.Struct(">qq")  # baseTimestamp, maxTimestamp at byte 27
CRC = struct.Struct(">I")


def template(records_per_batch: int) -> bytearray:
    rng = random.Random(7)
    recs = [NewRecord(rng.randbytes(RECORD_VALUE), None, (), 0) for _ in range(records_per_batch)]
    return bytearray(build_batch(recs))


def stamp(batch: bytearray, ts: int) -> bytearray:
    """Give the batch a new timestamp (all records share it) and re-checksum it."""
    TIMESTAMPS.pack_into(batch, 27, ts, ts)
    CRC.pack_into(batch, 17, crc32c.crc32c(memoryview(batch)[CRC_START:]))
    return batch


def bench_append(root: Path, batch_bytes: int, total_records: int, flush_every: bool) -> dict[str, float]:
    per_batch = max(1, batch_bytes // (RECORD_VALUE + 8))
    batch = template(per_batch)
    n_batches = total_records // per_batch
    configs = {"segment.bytes": str(2**30), "max.message.bytes": str(2 * 1024 * 1024)}
    if flush_every:
        configs["flush.messages"] = "1"
    data = root / f"append-{batch_bytes}-{int(flush_every)}"
    storage = Storage.open(data)
    storage.create_topic("bench", 1, configs)
    log = storage.log("bench", 0)
    ts0 = 1_700_000_000_000
    start = time.perf_counter()
    for i in range(n_batches):
        log.append(stamp(batch, ts0 + i))
    log.flush()
    elapsed = time.perf_counter() - start
    written = log.size_bytes
    storage.close()
    shutil.rmtree(data)
    return {
        "batch_bytes": len(batch),
        "records": n_batches * per_batch,
        "seconds": round(elapsed, 3),
        "MB_per_s": round(written / elapsed / 1e6, 1),
        "records_per_s": round(n_batches * per_batch / elapsed),
    }


def bench_raw_write(root: Path, total_bytes: int, chunk: int) -> dict[str, float]:
    """The machine's limit for the same job: os.write of chunks, one fsync at the end."""
    buf = os.urandom(chunk)
    path = root / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(total_bytes // chunk):
        os.write(fd, buf)
    os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    path.unlink()
    return {"chunk_bytes": chunk, "MB_per_s": round(total_bytes / elapsed / 1e6, 1)}


def build_big_log(root: Path, total_records: int) -> tuple[Path, int, int]:
    """A 1-partition topic of ``total_records`` in 16 KiB batches; returns (dir, first ts, batches)."""
    per_batch = 16 * 1024 // (RECORD_VALUE + 8)
    batch = template(per_batch)
    data = root / "big"
    storage = Storage.open(data)
    storage.create_topic("bench", 1, {"segment.bytes": str(2**30)})
    log = storage.log("bench", 0)
    ts0 = 1_700_000_000_000
    n = total_records // per_batch
    for i in range(n):
        log.append(stamp(batch, ts0 + i))
    storage.close()
    return data, ts0, n


def next_offset_after(chunk: bytes) -> int:
    """The offset after the last of the whole batches in ``chunk`` (headers only)."""
    pos, header = 0, None
    while pos < len(chunk):
        header = read_header(chunk, pos)
        pos += header.size
    assert header is not None
    return header.next_offset


def bench_reads(data: Path, ts0: int, n_batches: int, lookups: int) -> dict[str, object]:
    storage = Storage.open(data, read_only=True)
    log = storage.log("bench", 0)
    end = log.log_end_offset
    # sequential read, 1 MiB fetches
    offset, total = 0, 0
    start = time.perf_counter()
    while offset < end:
        chunk = log.read(offset, 1024 * 1024).data()
        total += len(chunk)
        offset = next_offset_after(chunk)
    seq = time.perf_counter() - start
    rng = random.Random(3)
    offset_lat = []
    for _ in range(lookups):
        target = rng.randrange(end)
        t = time.perf_counter()
        log.read(target, 1)
        offset_lat.append(time.perf_counter() - t)
    time_lat = []
    for _ in range(lookups):
        target = ts0 + rng.randrange(n_batches)
        t = time.perf_counter()
        found = log.offset_for_timestamp(target)
        time_lat.append(time.perf_counter() - t)
        assert found is not None and found.timestamp == target
    size = log.size_bytes
    storage.close()
    return {
        "records": end,
        "log_bytes": size,
        "sequential_read_MB_per_s": round(total / seq / 1e6, 1),
        "sequential_read_records_per_s": round(end / seq),
        "offset_lookup": summary_us(offset_lat),
        "timestamp_lookup": summary_us(time_lat),
    }


def bench_recovery(data: Path) -> dict[str, float]:
    """Reopen as after a crash: no clean-shutdown marker, recovery point 0."""
    (data / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    (data / RECOVERY_POINT).unlink(missing_ok=True)
    size = sum(p.stat().st_size for p in data.glob("bench-0/*.log"))
    start = time.perf_counter()
    storage = Storage.open(data)
    elapsed = time.perf_counter() - start
    assert not storage.clean_shutdown
    storage.close()
    start = time.perf_counter()
    storage = Storage.open(data)
    clean = time.perf_counter() - start
    storage.close()
    return {
        "log_bytes": size,
        "unclean_open_seconds": round(elapsed, 3),
        "recovery_MB_per_s": round(size / elapsed / 1e6, 1),
        "clean_open_seconds": round(clean, 4),
    }


def main() -> None:
    total = pick(10_000_000, 200_000)
    base = Path(os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="logtrove-bench-", dir=Path.cwd()))
    base.mkdir(parents=True, exist_ok=True)
    try:
        results: dict[str, object] = {}
        results["append_16KiB"] = bench_append(base, 16 * 1024, total, flush_every=False)
        results["append_1MiB"] = bench_append(base, 1024 * 1024, total, flush_every=False)
        results["append_1MiB_fsync_each"] = bench_append(base, 1024 * 1024, total // 4, flush_every=True)
        written = results["append_1MiB"]["records"] * (RECORD_VALUE + 8)  # type: ignore[index]
        results["raw_write_1MiB_fsync_at_end"] = bench_raw_write(base, int(written), 1024 * 1024)
        data, ts0, n_batches = build_big_log(base, total)
        results["reads"] = bench_reads(data, ts0, n_batches, pick(2000, 300))
        results["recovery"] = bench_recovery(data)
        results["plots"] = [
            {
                "title": "Append throughput, 100 B records (MB/s)",
                "ylabel": "MB/s",
                "bars": {
                    "16 KiB batches": results["append_16KiB"]["MB_per_s"],  # type: ignore[index]
                    "1 MiB batches": results["append_1MiB"]["MB_per_s"],  # type: ignore[index]
                    "1 MiB, fsync each": results["append_1MiB_fsync_each"]["MB_per_s"],  # type: ignore[index]
                    "raw os.write + fsync": results["raw_write_1MiB_fsync_at_end"]["MB_per_s"],  # type: ignore[index]
                },
            }
        ]
        save("storage", results)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
