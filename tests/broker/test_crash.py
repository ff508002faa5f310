"""kill -9 during an acks=all produce to a topic that fsyncs every batch
(``flush.messages=1``): after a restart every acknowledged message is there exactly once."""

from __future__ import annotations

import collections
import signal
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker import clients

from logtrove.testing import BrokerProcess, wait_until

TOPIC = "durable"


def test_acknowledged_messages_survive_kill_9(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"flush.messages": "1"})])[TOPIC].result(10)

    acked: list[bytes] = []
    stop = threading.Event()

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked.append(msg.value())  # type: ignore[attr-defined]

    def produce() -> None:
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "linger.ms": 1,
                "message.timeout.ms": 3000,
                "retries": 0,
            }
        )
        i = 0
        while not stop.is_set() and i < 1_000_000:
            producer.produce(TOPIC, value=f"m-{i}".encode(), partition=0, on_delivery=on_delivery)
            producer.poll(0)
            i += 1
            if i % 500 == 0:
                time.sleep(0.001)
        producer.flush(10)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        wait_until(
            lambda: len(acked) >= 3000, 20, interval_s=0.01, what=lambda: f"3000 acks ({len(acked)} came)"
        )
    finally:
        broker.stop(signal.SIGKILL)
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert len(acked) >= 3000

    broker.start()
    got = [value for _, value, _ in clients.consume_confluent(broker.bootstrap, TOPIC, len(acked))]
    counts = collections.Counter(got)
    missing = [v for v in acked if counts[v] == 0]
    duplicated = [v for v, n in counts.items() if n > 1]
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:3]}"
    assert not duplicated, f"duplicates: {duplicated[:3]}"


def test_idempotent_producer_retries_across_a_crash_land_exactly_once(broker: BrokerProcess) -> None:
    """kafka-python (idempotent by default) keeps sending while the broker is killed and
    restarted; its retries of batches appended just before the crash are recognised."""
    from kafka import KafkaProducer

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("exactly", 1, 1, config={"flush.messages": "1"})])["exactly"].result(10)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        acks="all",
        linger_ms=2,
        enable_idempotence=True,
        reconnect_backoff_ms=50,
    )
    futures = []
    total = 6000
    for i in range(total):
        futures.append(producer.send("exactly", value=f"e-{i}".encode(), partition=0))
        if i == total // 2:
            broker.stop(signal.SIGKILL)
            broker.start()
        if i % 200 == 0:
            time.sleep(0.005)
    producer.flush(60)
    failed = []
    for i, f in enumerate(futures):
        try:
            f.get(60)
        except Exception as exc:
            failed.append((i, repr(exc)))
    producer.close(10)
    assert not failed, f"{len(failed)} sends failed, e.g. {failed[:3]}"
    got = [value for _, value, _ in clients.consume_confluent(broker.bootstrap, "exactly", total)]
    counts = collections.Counter(got)
    duplicated = sorted(v for v, n in counts.items() if n > 1)
    assert not duplicated, f"{len(duplicated)} duplicated, e.g. {duplicated[:5]}"
    assert len(counts) == total, f"{total - len(counts)} messages missing"
