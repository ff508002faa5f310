"""The writer process of the crash tests: appends a known sequence of batches with
``flush.messages=1`` and prints ``n base last`` once each append has returned (that is,
once the batch is acknowledged), until it is killed.

    python -m tests.storage.crash_writer DATA_DIR FIRST_N plain|retention

With ``retention`` the topic keeps about 40 kB and the writer runs maintenance (retention,
purge, checkpoints) every 15 batches. Kept apart from the tests so that the child process
starts without importing pytest.
"""

from __future__ import annotations

import sys

from logtrove.records import Compression, NewRecord, build_batch
from logtrove.storage import Storage

TS0 = 1_700_000_000_000


def sequence_batch(n: int) -> tuple[list[NewRecord], Compression]:
    """The records of the n-th batch: a pure function of n, so that the parent can check
    every batch it finds record for record."""
    count = 1 + n % 7
    records = [
        NewRecord(
            f"{n}:{i}:".encode() + bytes([n % 251]) * ((n * 7 + i * 13) % 300), f"k{n}".encode(), (), TS0 + n
        )
        for i in range(count)
    ]
    return records, Compression(n % 5)


def main() -> None:
    path, n, retention = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "retention"
    storage = Storage.open(path)
    if not storage.has_topic("t"):
        configs = {"flush.messages": "1", "segment.bytes": "16384", "index.interval.bytes": "256"}
        if retention:
            configs.update({"retention.bytes": "40000", "file.delete.delay.ms": "0"})
        storage.create_topic("t", 1, configs)
    log = storage.log("t", 0)
    out = sys.stdout.buffer
    while True:
        records, codec = sequence_batch(n)
        result = log.append(build_batch(records, compression=codec))
        out.write(b"%d %d %d\n" % (n, result.base_offset, result.last_offset))
        out.flush()
        n += 1
        if retention and n % 15 == 0:
            storage.run_maintenance()


if __name__ == "__main__":
    main()
