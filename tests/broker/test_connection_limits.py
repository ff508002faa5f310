"""Connection limits of the Kafka listener, as Kafka's: idle connections are closed, a
slow sender is cut off, connections over the total or per-address limit are closed when
accepted while the admitted ones keep working; bytes after a whole request are ignored as
Kafka ignores them."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from logtrove.testing import BrokerProcess, WireClient, free_port, wait_until
from logtrove.wire import ApiKey

API_VERSIONS = {"client_software_name": "limits-test", "client_software_version": "1"}


@pytest.fixture
def start_broker() -> Iterator[list[BrokerProcess]]:
    started: list[BrokerProcess] = []
    yield started
    for proc in started:
        proc.stop()


def _broker(started: list[BrokerProcess], tmp_path: Path, *flags: str) -> BrokerProcess:
    proc = BrokerProcess(tmp_path / "data", free_port(), *flags)
    proc.start()
    started.append(proc)
    return proc


def _works(client: WireClient) -> bool:
    return bool(client.request(ApiKey.API_VERSIONS, 3, API_VERSIONS).error_code == 0)


def _closed_by_broker(sock: socket.socket, within_s: float = 15) -> bool:
    """Whether the broker closes ``sock`` within ``within_s`` (reads and drops any reply)."""
    sock.settimeout(within_s)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


def _admitted(port: int) -> WireClient:
    """A connection that answers a request. Retried briefly: the broker may not yet
    have noticed that the readiness probe of the fixture hung up (the 5 s are the 50 tries
    0.1 s apart this used to make)."""

    def admitted() -> WireClient | None:
        client = WireClient(port)
        try:
            return client if _works(client) else None
        except ConnectionError:
            client.sock.close()
            return None

    return wait_until(admitted, 5, interval_s=0.1, what="a connection admitted")


def test_idle_connection_is_closed_by_the_broker(start_broker: list[BrokerProcess], tmp_path: Path) -> None:
    broker = _broker(start_broker, tmp_path, "--connections-max-idle-ms", "1000")
    with WireClient(broker.port) as client:
        for _ in range(15):  # active for 1.5 s, longer than the idle limit: kept open
            assert _works(client)
            time.sleep(0.1)
        assert _closed_by_broker(client.sock)
    with WireClient(broker.port) as fresh:
        assert _works(fresh)


@pytest.mark.parametrize("flag", ["--max-connections", "--max-connections-per-ip"])
def test_connection_over_the_limit_is_closed_while_the_first_ones_work(
    start_broker: list[BrokerProcess], tmp_path: Path, flag: str
) -> None:
    broker = _broker(start_broker, tmp_path, flag, "3")
    admitted = [_admitted(broker.port) for _ in range(3)]
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as extra:
            with contextlib.suppress(ConnectionError):  # it may be closed already
                extra.sendall(struct.pack(">i", 4) + b"\0" * 4)
            assert _closed_by_broker(extra)
    assert all(_works(client) for client in admitted)
    refusals = [line for line in broker.log.read_text().splitlines() if "refused" in line]
    assert len(refusals) == 1, refusals  # logged once per interval, not per connection
    assert flag in refusals[0]
    admitted.pop().sock.close()
    with _admitted(broker.port) as replacement:  # a freed place is taken again
        assert _works(replacement)
    for client in admitted:
        client.sock.close()


def test_slow_sender_is_cut_off_while_others_work(start_broker: list[BrokerProcess], tmp_path: Path) -> None:
    broker = _broker(start_broker, tmp_path, "--request-read-timeout-ms", "1000")
    with WireClient(broker.port) as bystander, WireClient(broker.port) as slow:
        frame = slow.encode_request(ApiKey.API_VERSIONS, 3, API_VERSIONS)
        slow.sock.sendall(struct.pack(">i", len(frame)) + frame[: len(frame) // 2])
        started = time.monotonic()
        while time.monotonic() - started < 0.8:
            assert _works(bystander)
            time.sleep(0.1)
        assert _closed_by_broker(slow.sock)
        assert _works(bystander)
    assert broker.alive()


# librdkafka 2.x (confluent-kafka's admin list_topics) sends Metadata v12 with three bytes
# after the request; Kafka never checks that a request used its whole frame.
LIBRDKAFKA_METADATA_V12 = bytes.fromhex("0003000c00000005000772646b61666b610000000000010000")


def test_bytes_after_a_whole_request_are_ignored_as_kafka_does(shared_broker: BrokerProcess) -> None:
    with WireClient(shared_broker.port) as client:
        client.send_frame(LIBRDKAFKA_METADATA_V12)
        assert struct.unpack_from(">i", client.recv_frame())[0] == 5  # answered, correlation id 5
        assert _works(client)
