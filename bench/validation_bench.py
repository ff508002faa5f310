"""What produce validation costs on the append path, measured side by side in one run.

For batches of 100 B records as producers send them (1,000 records per batch, as
librdkafka with ``linger.ms=5`` does under load, and 10 per batch), uncompressed and
zstd, it times per record:

* ``header_crc``: the checks the broker did before validation (header and CRC32C,
  :func:`~logtrove.records.batch.validate_produced_batch`);
* ``full``: what produce now checks (:func:`~logtrove.records.walk.validate_produced`:
  the same plus decompression and the record walk), with the compiled walk, and the
  record walk alone with the pure-Python twin;
* ``append``: :meth:`PartitionLog.append` of the same batches to a real data directory
  (validation included), so ``added_share`` = (full − header_crc) / append is the share
  of an append's time that validation added.

Full size: 200,000 records per case; ``BENCH_QUICK=1``: 20,000.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import pick, save
from logtrove.records import Compression, NewRecord, build_batch
from logtrove.records.batch import validate_produced_batch
from logtrove.records.record import batch_payload
from logtrove.records.walk import IMPLEMENTATION, py_walk, validate_produced, walk
from logtrove.storage import Storage

RECORDS = pick(200_000, 20_000)
VALUE = b'{"order": 4711, "user": "u-000042", "status": "paid", "amount": 129.90, "pad": "xxxxxxxxxx"}'


def batches(per_batch: int, codec: Compression) -> list[bytes]:
    out = []
    for b in range(RECORDS // per_batch):
        records = [NewRecord(VALUE, key=f"k{b * per_batch + i}".encode()) for i in range(per_batch)]
        out.append(build_batch(records, compression=codec))
    return out


def per_record_ns(fn: Callable[[bytes], Any], data: list[bytes]) -> float:
    """Best of three passes over every batch, in ns per record."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for batch in data:
            fn(batch)
        best = min(best, time.perf_counter() - started)
    return best / RECORDS * 1e9


def append_ns(data: list[bytes]) -> float:
    folder = Path(tempfile.mkdtemp(prefix="logtrove-bench-validation-"))
    try:
        with Storage.open(folder / "data") as storage:
            storage.create_topic("bench", 1, {"segment.bytes": str(2**30)})
            log = storage.log("bench", 0)
            started = time.perf_counter()
            for batch in data:
                log.append(batch)
            return (time.perf_counter() - started) / RECORDS * 1e9
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def case(per_batch: int, codec: Compression) -> dict[str, Any]:
    data = batches(per_batch, codec)
    payloads = [bytes(batch_payload(b, validate_produced_batch(b))) for b in data]
    header_crc = per_record_ns(validate_produced_batch, data)
    full = per_record_ns(validate_produced, data)
    append = append_ns(data)
    row = {
        "records_per_batch": per_batch,
        "codec": codec.name.lower(),
        "header_crc_ns": round(header_crc, 1),
        "full_ns": round(full, 1),
        "walk_compiled_ns": round(per_record_ns(walk, payloads), 1),
        "walk_python_ns": round(per_record_ns(py_walk, payloads), 1),
        "append_ns": round(append, 1),
        "added_share": round((full - header_crc) / append, 3),
    }
    print(row, flush=True)
    return row


def main() -> None:
    rows = [case(n, codec) for n in (1000, 10) for codec in (Compression.NONE, Compression.ZSTD)]
    save(
        "validation",
        {
            "walk": IMPLEMENTATION,
            "records": RECORDS,
            "value_bytes": len(VALUE),
            "cases": rows,
        },
    )


if __name__ == "__main__":
    main()
