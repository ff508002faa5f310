"""The cluster ids the Apache Kafka harness formats its nodes with: Kafka's spelling, and
never one that ``kafka-storage format -t`` reads as an option."""

from __future__ import annotations

import base64

from logtrove.testing.kafka import _kafka_uuid


def test_cluster_ids_are_16_bytes_and_never_start_with_a_dash() -> None:
    ids = [_kafka_uuid() for _ in range(2000)]  # one random id in 64 started with "-"
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == len(ids)
