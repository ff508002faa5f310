"""Partitions do not exhaust the broker (issue 13, finding 6): a total partition cap with
a clear error, creation off the event loop, and a low ``ulimit -n`` that refuses clearly
while the broker keeps serving what it has and restarts."""

from __future__ import annotations

import resource
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from logtrove.records import NewRecord, build_batch, iter_records, read_header
from logtrove.testing import BrokerProcess, WireClient, cli_in, free_port, wait_until
from logtrove.wire import ApiKey

POLICY_VIOLATION = int(ErrorCode.policy_violation)
KAFKA_STORAGE_ERROR = int(ErrorCode.kafka_storage_error)


def _create_topic(client: WireClient, name: str, partitions: int) -> tuple[int, str | None]:
    body = {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": -1}],
        "timeout": 120_000,
    }
    result = client.request(ApiKey.CREATE_TOPICS, 7, body).topics[0]
    return int(result.error_code), result.error_message


def _create_partitions(client: WireClient, name: str, count: int) -> tuple[int, str | None]:
    body = {"topics": [{"name": name, "count": count, "assignments": None}], "timeout_ms": 60_000}
    result = client.request(ApiKey.CREATE_PARTITIONS, 3, body).results[0]
    return int(result.error_code), result.error_message


def _metadata(client: WireClient, names: list[str], *, create: bool = False) -> dict[str, Any]:
    body = {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": create}
    return {t.name: t for t in client.request(ApiKey.METADATA, 12, body).topics}


def _produce(client: WireClient, topic: str, partitions: range, value: bytes) -> list[int]:
    """One record to each partition; the error codes, by partition."""
    batch = build_batch([NewRecord(value)])
    data = [{"index": p, "records": batch} for p in partitions]
    resp = client.request(
        ApiKey.PRODUCE,
        9,
        {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": data}]},
    )
    by_index = {p.index: int(p.error_code) for p in resp.responses[0].partition_responses}
    return [by_index[p] for p in partitions]


def _fetch_values(client: WireClient, topic: str, partition: int) -> list[bytes | None]:
    part = {"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
    body = {
        "replica_id": -1,
        "max_wait": 10,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [{"topic": topic, "partitions": [part]}],
    }
    answer = client.request(ApiKey.FETCH, 11, body).responses[0].partitions[0]
    assert int(answer.error_code) == 0
    data = bytes(answer.records or b"")
    values: list[bytes | None] = []
    pos = 0
    while pos < len(data):
        header = read_header(data, pos)
        values += [r.value for r in iter_records(data, pos, header)]
        pos += header.size
    return values


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "data", free_port(), "--max-partitions", "10", "--no-indexer") as proc:
        yield proc


def test_the_total_partition_cap_refuses_create_topics_partitions_and_auto_create(
    capped: BrokerProcess, tmp_path: Path
) -> None:
    with WireClient(capped.port) as client:
        assert _create_topic(client, "a", 6) == (0, None)  # with __consumer_offsets: 7
        code, message = _create_topic(client, "b", 4)
        assert code == POLICY_VIOLATION
        assert message is not None and "limit of 10" in message and "--max-partitions" in message
        code, message = _create_partitions(client, "a", 11)
        assert code == POLICY_VIOLATION and message is not None and "limit of 10" in message
        assert _create_partitions(client, "a", 8) == (0, None)
        assert int(_metadata(client, ["auto"], create=True)["auto"].error_code) == 0  # the 10th
        assert int(_metadata(client, ["auto2"], create=True)["auto2"].error_code) == POLICY_VIOLATION
        assert _produce(client, "a", range(8), b"still served") == [0] * 8
    refused = cli_in(tmp_path, "topics", "create", "c", "--partitions", "3", "--bootstrap", capped.bootstrap)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "limit of 10" in lines[0] and "--max-partitions" in lines[0], refused.stderr


def _api_versions_latency(port: int) -> float:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.settimeout(30)
        client = WireClient.__new__(WireClient)
        client.sock, client.correlation = sock, 0
        started = time.monotonic()
        client.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "probe", "client_software_version": "1"}
        )
        return time.monotonic() - started


@pytest.mark.slow
def test_creating_a_large_topic_does_not_stall_other_connections(broker: BrokerProcess) -> None:
    outcome: list[tuple[int, str | None]] = []

    def create() -> None:
        with WireClient(broker.port, timeout=300) as client:
            outcome.append(_create_topic(client, "wide", 5000))

    creator = threading.Thread(target=create)
    creator.start()
    latencies: list[float] = []
    time.sleep(0.2)  # the request is in
    while creator.is_alive() and len(latencies) < 2000:
        latencies.append(_api_versions_latency(broker.port))
        time.sleep(0.02)
    creator.join(300)
    assert outcome == [(0, None)]
    assert len(latencies) >= 5, f"the creation took too little time to probe: {latencies}"
    assert statistics.median(latencies) < 0.1, latencies
    assert max(latencies) < 2, max(latencies)
    with WireClient(broker.port) as client:
        assert len(_metadata(client, ["wide"])["wide"].partitions) == 5000


FD_LIMIT = 256


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


class LowFdBroker(BrokerProcess):
    preexec = staticmethod(_low_fd_limit)


def _open_fds(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


@pytest.mark.slow
def test_a_low_ulimit_refuses_clearly_and_the_broker_keeps_serving_and_restarts(tmp_path: Path) -> None:
    broker = LowFdBroker(tmp_path / "data", free_port(), "--max-partitions", "1200", "--no-http")
    broker.start()
    extra: list[socket.socket] = []
    try:
        assert broker.proc is not None
        with WireClient(broker.port, timeout=120) as client:
            # 1,200 partitions, each written once, under ulimit -n 256: descriptors are no limit
            created = 0
            while True:
                code, message = _create_topic(client, f"t{created}", 100)
                if code:
                    break
                assert _produce(client, f"t{created}", range(100), b"r%d" % created) == [0] * 100
                created += 1
                assert created <= 12
            assert code == POLICY_VIOLATION and message is not None and "limit of 1200" in message
            assert created == 12 - 1  # __consumer_offsets holds one partition of the 1,200

            # use up the descriptors with connections: creating a topic then fails clearly
            time.sleep(2.5)  # the flush.ms round first (it reopens, then closes, pooled files)
            for _ in range(2 * FD_LIMIT):
                if _open_fds(broker.proc.pid) >= FD_LIMIT:
                    break
                extra.append(socket.create_connection(("127.0.0.1", broker.port), timeout=5))
                time.sleep(0.005)
            code, message = _create_topic(client, "one-too-many", 5)
            assert code == KAFKA_STORAGE_ERROR, (code, message)
            assert (
                message is not None
                and "too many open files: raise ulimit -n or lower --max-partitions" in message
            )
            for sock in extra:
                sock.close()
            extra.clear()

            # it keeps serving what it has, and accepts connections again
            assert int(_metadata(client, ["t3"])["t3"].error_code) == 0
            assert "one-too-many" not in {
                t.name for t in client.request(ApiKey.METADATA, 12, {"topics": None}).topics
            }
            assert _produce(client, "t3", range(100), b"again") == [0] * 100
            assert _fetch_values(client, "t3", 42) == [b"r3", b"again"]

        def fresh_connection_reads_t0() -> bool:
            try:
                with WireClient(broker.port) as fresh:
                    assert _fetch_values(fresh, "t0", 0) == [b"r0"]
            except (OSError, ConnectionError):
                return False
            return True

        wait_until(fresh_connection_reads_t0, 10, interval_s=0.1, what="a new connection reading t0")
        assert not (broker.data / "one-too-many-0").exists()

        broker.stop()
        broker.start()  # the same ulimit: the restart opens every partition
        with WireClient(broker.port) as client:
            assert _fetch_values(client, "t10", 99) == [b"r10"]
            assert _fetch_values(client, "t3", 42) == [b"r3", b"again"]
            assert _produce(client, "t5", range(100), b"after") == [0] * 100
    finally:
        for sock in extra:
            sock.close()
        broker.stop()
