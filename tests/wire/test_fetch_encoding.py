"""The hand-written Fetch response encoder agrees with kio's decoder in every served
version, and keeps large record payloads as separate chunks (no copy into the header)."""

from __future__ import annotations

import uuid

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from logtrove.records import NewRecord, build_batch
from logtrove.wire import ApiKey, FetchedPartition, encode_fetch_response


@pytest.mark.parametrize("version", range(4, 17))
def test_fetch_response_decodes_with_kio(version: int) -> None:
    big = bytes(build_batch([NewRecord(bytes(10_000), key=b"k")]))
    small = bytes(build_batch([NewRecord(b"v")]))
    topic_id = uuid.uuid4()
    topics = [
        (
            "orders",
            topic_id,
            [
                FetchedPartition(0, 0, 10, 0, big),
                FetchedPartition(1, 1, 5, 2, None),
                FetchedPartition(2, 0, 7, 0, small),
            ],
        )
    ]
    cls = load_response_schema(ApiKey.FETCH, version)
    chunks = encode_fetch_response(version, version >= 12, topics)
    assert any(c is big for c in chunks), "large records are their own chunk"
    decoded, size = entity_reader(cls)(b"".join(chunks), 0)
    assert size == sum(len(c) for c in chunks)
    topic = decoded.responses[0]
    if version >= 13:
        assert topic.topic_id == topic_id
    else:
        assert topic.topic == "orders"
    parts = topic.partitions
    assert [p.partition_index for p in parts] == [0, 1, 2]
    assert [int(p.error_code) for p in parts] == [0, 1, 0]
    assert [p.high_watermark for p in parts] == [10, 5, 7]
    assert [p.records for p in parts] == [big, b"", small]
    if version >= 5:
        assert [p.log_start_offset for p in parts] == [0, 2, 0]
