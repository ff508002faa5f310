"""Compatibility with kafka-python 3.0, a real Kafka client.

Both directions: batches kafka-python builds decode to the same records with our codec
(and re-encode to the same bytes when uncompressed), and batches we build decode to the
same records with kafka-python. kafka-python compresses through optional libraries
(python-snappy, lz4, zstandard); codecs whose library is missing here are skipped, and
test_aiokafka_compat.py covers them against another client.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logtrove.records import (
    Compression,
    NewRecord,
    build_batch,
    count_records,
    iter_records,
    validate_batch,
    validate_produced_batch,
)

from .helpers import (
    ALL_CODECS,
    T0,
    client_record,
    expected_records,
    many_records,
    record_lists,
    sample_records,
)

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas through a deprecated importlib API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

_AVAILABLE = {
    Compression.NONE: True,
    Compression.GZIP: kafka_codec.has_gzip(),
    Compression.SNAPPY: kafka_codec.has_snappy(),
    Compression.LZ4: kafka_codec.has_lz4(),
    Compression.ZSTD: kafka_codec.has_zstd(),
}
KAFKA_PYTHON_CODECS = [
    pytest.param(
        c,
        id=c.name.lower(),
        marks=pytest.mark.skipif(
            not _AVAILABLE[c], reason=f"kafka-python has no {c.name.lower()} library installed"
        ),
    )
    for c in ALL_CODECS
]
USABLE_CODECS = [c for c in ALL_CODECS if _AVAILABLE[c]]


def kafka_python_batch(
    records: Sequence[NewRecord],
    codec: Compression,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, r in enumerate(records):
        appended = builder.append(i, r.timestamp, r.key, r.value, list(r.headers))
        assert appended is not None
    return bytes(builder.build())


def decode_with_kafka_python(batch: bytes) -> list:
    decoded = DefaultRecordBatch(batch)
    assert decoded.validate_crc()
    return [client_record(r) for r in decoded]


# ── kafka-python → logtrove ────────────────────────────────────────────────────


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
@pytest.mark.parametrize("records", [sample_records(), many_records()], ids=["edge-cases", "many"])
def test_kafka_python_batch_decodes_to_the_same_records(codec, records):
    batch = kafka_python_batch(records, codec, producer_id=4711, producer_epoch=3, base_sequence=120)

    header = validate_produced_batch(batch)

    assert list(iter_records(batch)) == expected_records(records)
    assert count_records(batch) == len(records)
    assert header.record_count == len(records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4711, 3, 120)
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    if len(records) > 100:
        assert header.compression is codec  # compressible enough that the client compressed


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_transactional_kafka_python_batch_is_flagged_transactional(codec):
    batch = kafka_python_batch(
        many_records(50), codec, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True
    )

    header = validate_produced_batch(batch)

    assert header.is_transactional
    assert not header.is_control
    assert len(list(iter_records(batch))) == 50


@pytest.mark.parametrize("records", [sample_records(), many_records()], ids=["edge-cases", "many"])
def test_reencoding_an_uncompressed_kafka_python_batch_gives_identical_bytes(records):
    batch = kafka_python_batch(records, Compression.NONE, producer_id=7, producer_epoch=1, base_sequence=0)
    header = validate_produced_batch(batch)

    rebuilt = build_batch(
        list(iter_records(batch)),
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )

    assert rebuilt == batch


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS[1:])
def test_reencoded_compressed_kafka_python_batch_decodes_the_same_in_kafka_python(codec):
    records = many_records()
    batch = kafka_python_batch(records, codec)
    header = validate_produced_batch(batch)

    rebuilt = build_batch(
        list(iter_records(batch)),
        compression=header.compression,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )

    assert validate_produced_batch(rebuilt).compression is codec
    assert decode_with_kafka_python(rebuilt) == decode_with_kafka_python(batch)


def test_memory_records_builder_batch_decodes_to_the_same_records():
    records = sample_records()
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for r in records:
        assert builder.append(r.timestamp, r.key, r.value, list(r.headers)) is not None
    builder.close()
    batch = bytes(builder.buffer())

    validate_produced_batch(batch)

    assert list(iter_records(batch)) == expected_records(records)


@settings(max_examples=60, deadline=None)
@given(records=record_lists, codec=st.sampled_from(USABLE_CODECS))
def test_any_kafka_python_batch_decodes_to_the_records_it_was_given(records, codec):
    batch = kafka_python_batch(records, codec)

    validate_produced_batch(batch)

    assert list(iter_records(batch)) == expected_records(records)


# ── logtrove → kafka-python ────────────────────────────────────────────────────


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
@pytest.mark.parametrize("records", [sample_records(), many_records()], ids=["edge-cases", "many"])
def test_our_batch_decodes_to_the_same_records_in_kafka_python(codec, records):
    batch = build_batch(
        records,
        compression=codec,
        base_offset=1_000,
        producer_id=42,
        producer_epoch=2,
        base_sequence=77,
        partition_leader_epoch=5,
    )

    decoded = DefaultRecordBatch(batch)

    assert decoded.validate_crc()
    assert decoded.compression_type == int(codec)
    assert (decoded.base_offset, decoded.leader_epoch) == (1_000, 5)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (42, 2, 77)
    assert decoded.last_offset_delta == len(records) - 1
    assert decoded.first_timestamp == records[0].timestamp
    assert decoded.max_timestamp == max(r.timestamp for r in records)
    assert [client_record(r) for r in decoded] == expected_records(records, base_offset=1_000)


@pytest.mark.parametrize("records", [sample_records(), many_records()], ids=["edge-cases", "many"])
def test_our_uncompressed_batch_is_byte_identical_to_kafka_pythons(records):
    ours = build_batch(records, producer_id=7, producer_epoch=1, base_sequence=0, partition_leader_epoch=0)

    assert ours == kafka_python_batch(
        records, Compression.NONE, producer_id=7, producer_epoch=1, base_sequence=0
    )


@settings(max_examples=60, deadline=None)
@given(records=record_lists, codec=st.sampled_from(USABLE_CODECS))
def test_kafka_python_decodes_any_batch_we_build(records, codec):
    batch = build_batch(records, compression=codec)

    assert decode_with_kafka_python(batch) == expected_records(records)


def test_kafka_python_walks_a_log_of_our_batches_back_to_back():
    log = b""
    next_offset = 0
    for n, codec in enumerate(USABLE_CODECS * 2, start=1):
        records = [NewRecord(b"v%d" % i, key=b"k", timestamp=T0 + i) for i in range(n)]
        log += build_batch(records, compression=codec, base_offset=next_offset)
        next_offset += n

    offsets = []
    memory_records = MemoryRecords(log)
    while memory_records.has_next():
        batch = memory_records.next_batch()
        assert batch.validate_crc()
        offsets.extend(r.offset for r in batch)

    assert offsets == list(range(next_offset))
    pos = 0
    ours = []
    while pos < len(log):
        header = validate_batch(log, pos, expect_full=False)
        ours.extend(r.offset for r in iter_records(log, pos, header))
        pos += header.size
    assert ours == offsets


def test_log_append_time_batch_reports_max_timestamp_as_kafka_python_does():
    records = sample_records()
    batch = build_batch(records, log_append_time=True)

    kafka_python_timestamps = [r.timestamp for r in DefaultRecordBatch(batch)]
    our_timestamps = [r.timestamp for r in iter_records(batch)]

    assert DefaultRecordBatch(batch).timestamp_type == 1
    assert our_timestamps == kafka_python_timestamps == [max(r.timestamp for r in records)] * len(records)
