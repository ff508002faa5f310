"""Compatibility with aiokafka 0.14, a second real client, in every compression.

kafka-python here lacks the snappy, lz4 and zstd libraries; aiokafka compresses all
four codecs itself (xerial snappy, LZ4 frames with independent blocks, zstd), so it is
the cross-check for those codecs in both directions.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from hypothesis import given, settings

from logtrove.records import (
    Compression,
    NewRecord,
    build_batch,
    count_records,
    iter_records,
    validate_produced_batch,
)

from .helpers import (
    ALL_CODECS,
    COMPRESSED_CODECS,
    client_record,
    codecs,
    expected_records,
    many_records,
    record_lists,
    sample_records,
)

EXAMPLES = pytest.mark.parametrize("records", [sample_records(), many_records()], ids=["edge-cases", "many"])


def aiokafka_batch(
    records: Sequence[NewRecord],
    codec: Compression,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, r in enumerate(records):
        assert builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(builder.build())


def decode_with_aiokafka(batch: bytes) -> list:
    decoded = DefaultRecordBatch(batch)
    assert decoded.validate_crc()
    return [client_record(r) for r in decoded]


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name.lower())
@EXAMPLES
def test_aiokafka_batch_decodes_to_the_same_records(codec, records):
    batch = aiokafka_batch(records, codec, producer_id=31, producer_epoch=4, base_sequence=1_000)

    header = validate_produced_batch(batch)

    assert list(iter_records(batch)) == expected_records(records)
    assert count_records(batch) == len(records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (31, 4, 1_000)
    if len(records) > 100:
        assert header.compression is codec


@EXAMPLES
def test_reencoding_an_uncompressed_aiokafka_batch_gives_identical_bytes(records):
    batch = aiokafka_batch(records, Compression.NONE, producer_id=31, producer_epoch=4, base_sequence=0)
    header = validate_produced_batch(batch)

    rebuilt = build_batch(
        list(iter_records(batch)),
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )

    assert rebuilt == batch


@pytest.mark.parametrize("codec", COMPRESSED_CODECS, ids=lambda c: c.name.lower())
def test_reencoded_compressed_aiokafka_batch_decodes_the_same_in_aiokafka(codec):
    batch = aiokafka_batch(many_records(), codec)
    header = validate_produced_batch(batch)

    rebuilt = build_batch(
        list(iter_records(batch)),
        compression=header.compression,
        partition_leader_epoch=header.partition_leader_epoch,
    )

    assert validate_produced_batch(rebuilt).compression is codec
    assert decode_with_aiokafka(rebuilt) == decode_with_aiokafka(batch)


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name.lower())
@EXAMPLES
def test_our_batch_decodes_to_the_same_records_in_aiokafka(codec, records):
    batch = build_batch(
        records, compression=codec, base_offset=500, producer_id=8, producer_epoch=0, base_sequence=3
    )

    decoded = DefaultRecordBatch(batch)

    assert decoded.compression_type == int(codec)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (8, 0, 3)
    assert decode_with_aiokafka(batch) == expected_records(records, base_offset=500)


def test_large_batch_spanning_many_compression_blocks_round_trips_with_aiokafka():
    """Payloads over 64 KiB (LZ4 block) and 32 KiB (xerial snappy block) use several blocks."""
    records = many_records(5_000)
    for codec in COMPRESSED_CODECS:
        ours = build_batch(records, compression=codec)
        theirs = aiokafka_batch(records, codec)

        assert decode_with_aiokafka(ours) == expected_records(records)
        assert list(iter_records(theirs)) == expected_records(records)


@settings(max_examples=60, deadline=None)
@given(records=record_lists, codec=codecs)
def test_any_batch_round_trips_between_aiokafka_and_us(records, codec):
    theirs = aiokafka_batch(records, codec)
    ours = build_batch(records, compression=codec)

    validate_produced_batch(theirs)
    assert list(iter_records(theirs)) == expected_records(records)
    assert decode_with_aiokafka(ours) == expected_records(records)
