"""Offset-map benchmark: the Spark job that computes a compacted partition's key → latest
offset map (:func:`logtrove.spark.compaction.build_offset_map`) at a key count far past
one process's map budget, and the cleaner round that uses the map.

Workload: ``OFFSET_MAP_KEYS`` distinct keys (full: 100 M; ``BENCH_QUICK=1``: 1 M), each
written once as ``key-<n>`` with a 10-byte value, in 256 MiB segments of one compacted
partition, encoded by the columnar encoder (:mod:`logtrove.records.encoder`) 2,000
records a batch; then every third key written again, so a third of the first pass is
obsolete. local[2] Spark with the C2 JIT and ``OFFSET_MAP_DRIVER_MEMORY`` (default 6g)
of JVM heap.

Figures: the build time of the data; the map job's wall time, keys/s and MB/s of log
read; the driver process's peak RSS (the job must not pull the keys into it: a 100 M-key
map is 2.4 GB of entries); the map file's size; then ``logtrove compact --offset-map``'s
wall time and the log's size before and after. The 1-minute load average is noted at
each step: the machine may be shared. Prints and saves ``bench/results/offset_map.json``.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import QUICK, pick, save
from logtrove.records.builder import frame_records
from logtrove.records.encoder import encode_records
from logtrove.storage import Storage

SEGMENT_BYTES = 256 * 1024 * 1024
PER_BATCH = 2_000
CHUNK = 1_000_000


def write_keys(log: object, first: int, last: int, step: int, ts: int) -> int:
    """Append ``key-<n>`` for n in ``range(first, last, step)``; returns the record count."""
    import pyarrow as pa
    import pyarrow.compute as pc

    written = 0
    value = pa.py_buffer(b"0123456789")
    for lo in range(first, last, CHUNK * step):
        numbers = pa.array(range(lo, min(last, lo + CHUNK * step), step), pa.int64())
        rows = len(numbers)
        keys = pc.binary_join_element_wise("key-", numbers.cast(pa.string()), "").cast(pa.binary())
        _, key_ends, key_data = keys.buffers()
        value_ends = pa.array(range(0, 10 * rows + 1, 10), pa.int32()).buffers()[1]
        value_data = pa.py_buffer(value.to_pybytes() * rows)
        order = pa.array(range(rows), pa.int64()).buffers()[1]
        key_spec = (None, key_ends, key_data, False, 0)
        value_spec = (None, value_ends, value_data, False, 0)
        start = 0
        while start < rows:
            hi = min(rows, start + PER_BATCH)
            payload, end, base_ts, max_ts = encode_records(
                key_spec, value_spec, None, None, rows, order, start, hi, 1 << 30, ts
            )
            log.append(frame_records(payload, end - start, base_ts, max_ts))  # type: ignore[attr-defined]
            start = end
        written += rows
    return written


def build(data: Path, keys: int) -> tuple[int, int]:
    storage = Storage.open(data)
    storage.create_topic("m", 1, {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES)})
    log = storage.log("m", 0)
    ts = 1_700_000_000_000
    records = write_keys(log, 0, keys, 1, ts)
    records += write_keys(log, 0, keys, 3, ts + 1)
    log.roll()
    size = log.size_bytes
    storage.close()
    return records, size


def main() -> None:
    keys = int(os.environ.get("OFFSET_MAP_KEYS") or pick(100_000_000, 1_000_000))
    memory = os.environ.get("OFFSET_MAP_DRIVER_MEMORY", "6g")
    base = Path(
        tempfile.mkdtemp(prefix="logtrove-offset-map-", dir=os.environ.get("BENCH_DIR") or Path.cwd())
    )
    try:
        data = base / "data"
        load_build = os.getloadavg()[0]
        t = time.perf_counter()
        records, size = build(data, keys)
        build_s = time.perf_counter() - t
        print(
            f"built {records:,} records over {keys:,} keys, {size / 1e6:,.0f} MB in {build_s:.0f} s",
            flush=True,
        )

        from logtrove.spark.compaction import build_offset_map
        from logtrove.spark.session import java_options, local_session

        os.environ.setdefault(
            "PYSPARK_SUBMIT_ARGS",
            f'--driver-memory {memory} --driver-java-options "{java_options(True)}" pyspark-shell',
        )
        spark = local_session("logtrove-offset-map-bench", master="local[2]", full_jit=True)
        load_map = os.getloadavg()[0]
        t = time.perf_counter()
        result = build_offset_map(spark, str(data), "m", 0, base / "m-0.map")
        map_s = time.perf_counter() - t
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        spark.stop()
        map_bytes = result.path.stat().st_size
        print(
            f"map of {result.keys:,} keys in {map_s:.0f} s ({result.keys / map_s:,.0f} keys/s,"
            f" {size / map_s / 1e6:.1f} MB/s of log), driver peak RSS {rss_mib:,.0f} MiB,"
            f" file {map_bytes / 1e6:,.0f} MB",
            flush=True,
        )

        load_compact = os.getloadavg()[0]
        t = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from logtrove.cli.main import main; main()",
                "compact",
                "m",
                "--partition",
                "0",
                "--offset-map",
                str(result.path),
                "--data",
                str(data),
            ],
            check=True,
            capture_output=True,
        )
        compact_s = time.perf_counter() - t
        with Storage.open(data, read_only=True) as storage:
            after = storage.log("m", 0).size_bytes
        print(f"compacted {size / 1e6:,.0f} → {after / 1e6:,.0f} MB in {compact_s:.0f} s", flush=True)
        save(
            "offset_map",
            {
                "workload": {
                    "keys": keys,
                    "records": records,
                    "log_bytes": size,
                    "value_bytes": 10,
                    "spark": f"local[2], C2 JIT, driver memory {memory}",
                    "quick": QUICK,
                },
                "build": {"seconds": round(build_s, 1), "load_1m": round(load_build, 2)},
                "map_job": {
                    "seconds": round(map_s, 1),
                    "keys": result.keys,
                    "keys_per_s": round(result.keys / map_s),
                    "log_MB_per_s": round(size / map_s / 1e6, 2),
                    "driver_peak_rss_MiB": round(rss_mib, 1),
                    "map_file_bytes": map_bytes,
                    "load_1m": round(load_map, 2),
                },
                "compact": {
                    "seconds": round(compact_s, 1),
                    "bytes_before": size,
                    "bytes_after": after,
                    "MB_per_s": round(size / compact_s / 1e6, 2),
                    "load_1m": round(load_compact, 2),
                },
            },
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
