"""Produce and ListOffsets over the raw Kafka protocol, for the broker tests that send
exact bytes (malformed batches, transactional batches) and check the log end offset."""

from __future__ import annotations

from logtrove.testing import WireClient
from logtrove.wire import ApiKey


def produce_raw(client: WireClient, topic: str, records: bytes) -> tuple[int, str | None, int]:
    resp = client.request(
        ApiKey.PRODUCE,
        9,
        {
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), part.error_message, int(part.base_offset)


def log_end(client: WireClient, topic: str) -> int:
    return int(client.list_offsets(topic, 0, -1).offset)
