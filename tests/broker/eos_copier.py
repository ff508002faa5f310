"""A consume-transform-produce loop, run as its own process by test_exactly_once.py.

usage: python eos_copier.py BOOTSTRAP INPUT OUTPUT TOTAL

Reads INPUT (read_committed, group ``eos-copier``), writes ``out-<value>`` to OUTPUT in
transactions of a few records, each committing the consumer's positions with
``send_offsets_to_transaction``. Exits 0 once the group's committed offsets add up to
TOTAL records and nothing is left to read,
3 on any error (the test starts it again: the new producer fences the old transaction).
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

GROUP = "eos-copier"
TRANSACTIONAL_ID = "eos-copier-tx"


def main(bootstrap: str, source: str, sink: str, total: int) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,  # a killed copier's membership ends soon (Kafka's minimum)
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID, "linger.ms": 5}
    )
    try:
        producer.init_transactions(20)
        consumer.subscribe([source])
        partitions = [
            TopicPartition(source, p) for p in consumer.list_topics(source, 20).topics[source].partitions
        ]
        while True:
            polled = consumer.consume(7, 0.5)
            for m in polled:
                if m.error():
                    print(f"consumer error: {m.error()}", file=sys.stderr, flush=True)
            messages = [m for m in polled if not m.error()]
            if not messages and _all_committed(consumer, partitions, total):
                return 0
            if not messages:
                continue
            producer.begin_transaction()
            for m in messages:
                producer.produce(sink, value=b"out-" + m.value(), partition=m.partition())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 20)
            producer.commit_transaction(20)
            print(f"committed {[p.offset for p in positions]}", file=sys.stderr, flush=True)
    except KafkaException as exc:
        print(f"copier stops: {exc}", file=sys.stderr)
        return 3
    finally:
        consumer.close()


def _all_committed(consumer: Consumer, partitions: list[TopicPartition], total: int) -> bool:
    """Whether the group's committed offsets add up to ``total`` (no when it cannot tell:
    during a rebalance the committed offsets may not be available)."""
    try:
        return sum(max(tp.offset, 0) for tp in consumer.committed(partitions, 5)) >= total
    except KafkaException:
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
