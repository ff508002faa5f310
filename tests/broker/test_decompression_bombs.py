"""Decompression bombs already on disk (issue 13, finding 4).

A data directory written by older code may hold a batch of 34 KB that decompresses to
1 GiB of zeros. It is written here with storage's own append (no record validation, as
the cleaner appends), then a real broker with its indexer child, cleaner and HTTP API
serves it: the indexer skips the batch and indexes past it, the cleaner marks the
compacted partition uncleanable with the reason, content searches (HTTP and ``logtrove
query``) skip it, browsing over it or reading its offset is a 422 problem naming it, and
the Kafka listener keeps answering ApiVersions while all that runs. Memory is the peak RSS
(VmHWM) of the broker and of each of its children, read from /proc."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from tests.broker.procs import peak_rss_kib
from tests.records.helpers import patch_header, with_payload, zstd_zeros

from logtrove.records import Compression, NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.testing import SERVE, HttpBrokerProcess, WireClient, free_port, wait_until
from logtrove.wire import ApiKey

MEMORY_LIMIT_KIB = 300 << 10


def bomb_batch(base_offset: int) -> bytes:
    template = build_batch([NewRecord(b"x", key=b"bomb")], compression=Compression.ZSTD)
    return bytes(with_payload(patch_header(template, base_offset=base_offset), zstd_zeros(1 << 30)))


def write_data_dir(path: Path) -> None:
    """``bombs`` and the compacted ``bombs-compact``: a good batch, the bomb, a good batch
    (the compacted one rolled, so that the cleaner may clean the bomb's segment)."""
    with Storage.open(path) as storage:
        storage.create_topic("bombs", 1)
        storage.create_topic(
            "bombs-compact", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
        )
        for topic in ("bombs", "bombs-compact"):
            log = storage.log(topic, 0)
            log.append(build_batch([NewRecord(b"before needle", key=b"a")]))
            log.append(bomb_batch(log.log_end_offset), assign_offsets=False)
            log.append(build_batch([NewRecord(b"after needle", key=b"a")]))
            if topic == "bombs-compact":
                log.roll()
                log.append(build_batch([NewRecord(b"newest", key=b"a")]))


def api_versions_ms(port: int) -> float:
    started = time.perf_counter()
    with WireClient(port) as client:
        assert (
            client.request(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            ).error_code
            == 0
        )
    return (time.perf_counter() - started) * 1000


@pytest.mark.slow
def test_a_bomb_on_disk_is_skipped_and_reported_without_growing_any_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_data_dir(data)
    broker = HttpBrokerProcess(
        data, free_port(), free_port(), "--indexer-flush-s", "0.2", "--cleaner-interval-s", "0.2"
    )
    broker.start()
    try:
        assert broker.proc is not None
        api = f"{broker.http}/api/v1"
        answers: list[int] = []
        stop = threading.Event()

        def read_the_partition() -> None:
            with httpx.Client(timeout=60) as http:
                while not stop.is_set():
                    for url in (
                        f"{api}/topics/bombs/partitions/0/messages?offset=0",
                        f"{api}/topics/bombs/messages/search?contains=needle",
                        f"{api}/topics/bombs/partitions/0/offsets/1",
                    ):
                        answers.append(http.get(url).status_code)

        reader = threading.Thread(target=read_the_partition)
        reader.start()
        probes = []
        try:
            for _ in range(40):
                probes.append(api_versions_ms(broker.port))
                time.sleep(0.05)
        finally:
            stop.set()
            reader.join(120)
        browse, search, at_offset = set(answers[0::3]), set(answers[1::3]), set(answers[2::3])
        assert (browse, search, at_offset) == ({422}, {200}, {422}), answers
        assert statistics.median(probes) < 100 and max(probes) < 2000, probes
        assert max(peak_rss_kib(broker.proc.pid).values()) < MEMORY_LIMIT_KIB

        with httpx.Client(timeout=30) as http:

            def progress() -> tuple[int, str]:
                """(the indexed offset, the cleaner's state file)."""
                detail = http.get(f"{api}/topics/bombs").json()
                state = data / "cleaner-state.json"
                return detail["partition_list"][0][
                    "indexed_offset"
                ], state.read_text() if state.exists() else ""

            def indexed_and_cleaned() -> bool:
                indexed, state = progress()
                return indexed == 3 and "DecompressionLimitError" in state

            wait_until(
                indexed_and_cleaned,
                60,
                interval_s=0.2,
                what=lambda: (
                    f"offset 3 indexed and the bomb reported by the cleaner (last seen: {progress()})"
                ),
            )
            found = http.get(f"{api}/topics/bombs/messages/by-key?key=a").json()
            assert sorted(m["value"] for m in found["messages"]) == ["after needle", "before needle"]

        query = subprocess.run(
            [
                sys.executable,
                "-c",
                "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)",
                sys.executable,
                "-c",
                SERVE,
                "query",
                "bombs",
                "--data",
                str(data),
                "--contains",
                "needle",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ,
            check=False,
        )
        query_kib, code = map(int, query.stdout.split()[-2:])
        assert code == 0 and "before needle" in query.stdout and "after needle" in query.stdout, query.stderr
        assert "batch at offset 1 skipped: zstd payload decompresses to more than" in query.stderr
        assert query_kib < MEMORY_LIMIT_KIB, query_kib

        peaks = peak_rss_kib(broker.proc.pid)
        assert len(peaks) >= 2, peaks  # the broker and its indexer child
        assert max(peaks.values()) < MEMORY_LIMIT_KIB, peaks
        assert broker.alive()
    finally:
        broker.stop()
