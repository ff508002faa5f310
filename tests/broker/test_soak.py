"""Soak: everything at once against one broker that is SIGKILLed and restarted every
:data:`KILL_EVERY_S` seconds, for ``LOGTROVE_SOAK_S`` seconds (default 150).

Running together: idempotent producers (acks=all) to topics with ``flush.messages=1``,
consumers of one group joining and leaving (rebalances, commits), DeleteRecords on one
topic, scratch topics created, written and deleted, and HTTP searches. At the end every
record a producer saw acknowledged is read back at its acknowledged offset with its value
(below a confirmed DeleteRecords point it may be gone, nothing else), and every restart
answered Kafka requests within :data:`RESTART_BOUND_S`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.client import HTTPException
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.testing import HttpBrokerProcess, free_port, wait_until

pytestmark = pytest.mark.slow

SOAK_S = float(os.environ.get("LOGTROVE_SOAK_S", "150"))
KILL_EVERY_S = 30.0
RESTART_BOUND_S = 30.0
DURABLE = {"flush.messages": "1"}
TOPICS = {"soak-a": 3, "soak-b": 2, "soak-trim": 1}


@dataclass
class Ledger:
    """What the clients saw acknowledged, and what the soak did to the broker."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[tuple[str, int, int], bytes] = field(default_factory=dict)
    trimmed_to: int = 0  # confirmed DeleteRecords point of soak-trim partition 0
    restarts: list[float] = field(default_factory=list)
    searches_ok: int = 0
    consumed: int = 0
    scratch_cycles: int = 0

    def ack(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        with self.lock:
            self.acked[(topic, partition, offset)] = value


def _loop(stop: threading.Event, pause_s: float, body: Callable[[], None]) -> Callable[[], None]:
    """``body`` again and again until ``stop``; a failure while the broker is down is
    expected and only delays the next round (an HTTP answer cut by a restart is one:
    ``IncompleteRead`` is not an ``OSError``, and it used to end the searcher thread)."""

    def run() -> None:
        while not stop.is_set():
            with contextlib.suppress(KafkaException, OSError, HTTPException, RuntimeError, ValueError):
                body()
            stop.wait(pause_s)

    return run


def _producer(bootstrap: str, ledger: Ledger, name: str, stop: threading.Event) -> Callable[[], None]:
    def run() -> None:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "reconnect.backoff.max.ms": 500,
            }
        )

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                ledger.ack(msg.topic(), msg.partition(), msg.offset(), msg.value())

        i = 0
        while not stop.is_set():
            topic = list(TOPICS)[i % len(TOPICS)]
            with contextlib.suppress(BufferError):
                producer.produce(
                    topic, key=f"k{i % 50}".encode(), value=f"{name}-{i}".encode(), on_delivery=delivered
                )
                i += 1
            producer.poll(0.002)
        producer.flush(90)

    return run


def _consumers(bootstrap: str, ledger: Ledger, stop: threading.Event) -> Callable[[], None]:
    """One member of group ``soak`` for 5-15 s at a time: each join and leave rebalances."""
    rounds = iter(range(10**6))

    def body() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "soak",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            }
        )
        try:
            consumer.subscribe(["soak-a", "soak-b"])
            until = time.monotonic() + 5 + (next(rounds) % 3) * 5
            while time.monotonic() < until and not stop.is_set():
                for msg in consumer.consume(500, 0.5):
                    if msg.error() is None:
                        ledger.consumed += 1
        finally:
            consumer.close()

    return _loop(stop, 0.1, body)


def _admin(bootstrap: str, ledger: Ledger, stop: threading.Event) -> Callable[[], None]:
    """Trims soak-trim to half its acknowledged end, and creates, fills and deletes a
    scratch topic, every few seconds."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cycle = iter(range(10**6))

    def body() -> None:
        with ledger.lock:
            ends = [o for (t, _p, o) in ledger.acked if t == "soak-trim"]
        target = (max(ends) + 1) // 2 if ends else 0
        if target > ledger.trimmed_to:
            futures = admin.delete_records([TopicPartition("soak-trim", 0, target)], request_timeout=10)
            for future in futures.values():
                future.result(15)
            ledger.trimmed_to = target
        name = f"scratch-{next(cycle)}"
        admin.create_topics([NewTopic(name, 4, 1)], request_timeout=10)[name].result(15)
        producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000})
        for n in range(40):
            producer.produce(name, value=f"s{n}".encode(), partition=n % 4)
        producer.flush(15)
        admin.delete_topics([name], request_timeout=10)[name].result(15)
        ledger.scratch_cycles += 1

    return _loop(stop, 3.0, body)


def _searcher(http: str, ledger: Ledger, stop: threading.Event) -> Callable[[], None]:
    def body() -> None:
        for query in ({"contains": "p1-1"}, {"regex": "(p0-)+9$"}, {"key": "k7"}):
            path = "by-key" if "key" in query else "search"
            url = f"{http}/api/v1/topics/soak-a/messages/{path}?{urllib.parse.urlencode(query)}&limit=20"
            with urllib.request.urlopen(url, timeout=10) as answer:
                answer.read()
                ledger.searches_ok += answer.status == 200

    return _loop(stop, 1.0, body)


def _kafka_answers(bootstrap: str) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000})
    try:
        return "soak-a" in admin.list_topics(timeout=2).topics
    except KafkaException:
        return False


def _read_all(bootstrap: str, topic: str, partition: int, end: int) -> dict[int, bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "soak-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    got: dict[int, bytes] = {}

    def at_end() -> bool:
        for msg in consumer.consume(5000, 0.5):
            assert msg.error() is None, msg.error()
            got[msg.offset()] = msg.value()
        return bool(got) and max(got) >= end

    try:
        wait_until(
            at_end, 120, interval_s=0, what=lambda: f"{topic}-{partition} read to {end} ({len(got)} read)"
        )
    finally:
        consumer.close()
    return got


@pytest.fixture
def soak_broker(tmp_path: Path) -> Iterator[HttpBrokerProcess]:
    with HttpBrokerProcess(tmp_path / "data", free_port(), free_port(), "--indexer-flush-s", "0.5") as proc:
        yield proc


def test_soak_no_acknowledged_record_lost_across_kills(soak_broker: HttpBrokerProcess) -> None:
    broker = soak_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name, count in TOPICS.items():
        admin.create_topics([NewTopic(name, count, 1, config=DURABLE)])[name].result(15)

    ledger, stop = Ledger(), threading.Event()
    workers = [
        threading.Thread(target=_producer(broker.bootstrap, ledger, f"p{n}", stop), daemon=True)
        for n in range(3)
    ]
    workers += [
        threading.Thread(target=_consumers(broker.bootstrap, ledger, stop), daemon=True) for _ in range(2)
    ]
    workers.append(threading.Thread(target=_admin(broker.bootstrap, ledger, stop), daemon=True))
    workers.append(threading.Thread(target=_searcher(broker.http, ledger, stop), daemon=True))
    for worker in workers:
        worker.start()

    try:
        end = time.monotonic() + SOAK_S
        while time.monotonic() + KILL_EVERY_S <= end:
            time.sleep(KILL_EVERY_S)
            broker.stop(signal.SIGKILL)
            started = time.monotonic()
            broker.start()
            while not _kafka_answers(broker.bootstrap) and time.monotonic() - started < 120:
                time.sleep(0.1)
            ledger.restarts.append(time.monotonic() - started)
        time.sleep(max(0.0, end - time.monotonic()))
    finally:
        stop.set()
        for worker in workers:
            worker.join(120)
    assert not [w for w in workers if w.is_alive()], "a client thread did not stop"

    print(
        f"soak: {len(ledger.acked)} acked, {ledger.consumed} consumed, {ledger.searches_ok} searches, "
        f"{ledger.scratch_cycles} scratch topics, trimmed to {ledger.trimmed_to}, restarts {ledger.restarts}"
    )
    assert ledger.restarts, "the soak ended before its first kill"
    assert max(ledger.restarts) < RESTART_BOUND_S, f"restarts took {ledger.restarts} s"
    assert len(ledger.acked) > 1000, f"only {len(ledger.acked)} records acknowledged"
    assert ledger.searches_ok > 0 and ledger.scratch_cycles > 0 and ledger.consumed > 0

    by_partition: dict[tuple[str, int], dict[int, bytes]] = {}
    for (topic, partition, offset), value in ledger.acked.items():
        by_partition.setdefault((topic, partition), {})[offset] = value
    for (topic, partition), expected in sorted(by_partition.items()):
        floor = ledger.trimmed_to if topic == "soak-trim" else 0
        got = _read_all(broker.bootstrap, topic, partition, max(expected))
        lost = [o for o in expected if o >= floor and o not in got]
        changed = [o for o in expected if o in got and got[o] != expected[o]]
        assert not lost, (
            f"{topic}-{partition}: {len(lost)} acknowledged records lost, e.g. offsets {lost[:5]}"
        )
        assert not changed, f"{topic}-{partition}: records changed at offsets {changed[:5]}"
