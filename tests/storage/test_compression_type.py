"""A topic's ``compression.type`` (Kafka's): ``producer`` stores each batch as produced;
a named codec has every produced batch in another codec recompressed on append, its
records, offsets and timestamps unchanged; values other than Kafka's are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.records.helpers import with_payload

from logtrove.records import (
    Compression,
    CorruptRecordError,
    NewRecord,
    build_batch,
    read_header,
)
from logtrove.storage import InvalidConfigError, InvalidRecordError, RecordTooLargeError, Storage
from logtrove.storage.config import COMPRESSION_TYPES
from logtrove.testing import FakeClock

from .helpers import TOPIC, decode_batches, expected_tuples, open_topic
from .helpers import as_tuple as row


def records(n: int = 50, start: int = 0) -> list[NewRecord]:
    return [
        NewRecord(b'{"n": %d, "pad": "%s"}' % (i, b"x" * 80), b"k%d" % (i % 5), (), 1_000 + i)
        for i in range(start, start + n)
    ]


def stored(storage: Storage) -> list[tuple[Compression, list[tuple[object, ...]]]]:
    """(codec, records) of each batch of the test topic's partition 0, as read back."""
    log = storage.log(TOPIC, 0)
    data = log.read(0, 1 << 30).data()
    codecs = []
    pos = 0
    while pos < len(data):
        header = read_header(data, pos)
        codecs.append(header.compression)
        pos += header.size
    batches = [[row(r) for r in rs] for _, _, rs in decode_batches(data)]
    return list(zip(codecs, batches, strict=True))


@pytest.mark.parametrize("source", list(Compression), ids=lambda c: c.name.lower())
def test_a_batch_appended_to_a_zstd_topic_reads_back_zstd_with_the_same_records(
    tmp_path: Path, source: Compression
) -> None:
    storage, log = open_topic(tmp_path, compression_type="zstd")
    first, second = records(), records(30, start=50)
    log.append(build_batch(first, compression=source))
    log.append(build_batch(second, compression=Compression.ZSTD))
    assert stored(storage) == [
        (Compression.ZSTD, expected_tuples(first, 0)),
        (Compression.ZSTD, expected_tuples(second, 50)),
    ]
    storage.close()


def test_producer_keeps_every_batch_as_it_came(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path)
    assert log.config.compression_type == "producer"
    sent = [build_batch(records(10, 10 * i), compression=codec) for i, codec in enumerate(Compression)]
    for batch in sent:
        log.append(batch)
    data = log.read(0, 1 << 30).data()
    # as sent but for the offset and the leader epoch (0) the leader stamps, outside the CRC
    epoch = (0).to_bytes(4, "big")
    assert data == b"".join(
        (10 * i).to_bytes(8, "big") + b[8:12] + epoch + b[16:] for i, b in enumerate(sent)
    )
    storage.close()


@pytest.mark.parametrize(
    ("setting", "codec"),
    [
        ("uncompressed", Compression.NONE),
        ("gzip", Compression.GZIP),
        ("snappy", Compression.SNAPPY),
        ("lz4", Compression.LZ4),
    ],
)
def test_every_named_codec_is_what_the_log_stores(tmp_path: Path, setting: str, codec: Compression) -> None:
    storage, log = open_topic(tmp_path, compression_type=setting)
    sent = records()
    source = Compression.ZSTD
    log.append(build_batch(sent, compression=source, producer_id=7, producer_epoch=1, base_sequence=0))
    [(got, rows)] = stored(storage)
    assert (got, rows) == (codec, expected_tuples(sent, 0))
    header = read_header(log.read(0, 1 << 20).data())
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)
    storage.close()


def test_recompressed_records_get_log_append_time_too(tmp_path: Path) -> None:
    clock = FakeClock()
    storage, log = open_topic(
        tmp_path, clock, compression_type="gzip", message_timestamp_type="LogAppendTime"
    )
    result = log.append(build_batch(records(5), compression=Compression.LZ4))
    [(codec, rows)] = stored(storage)
    assert codec is Compression.GZIP
    assert result.log_append_time == clock.now_ms()
    assert {r[1] for r in rows} == {clock.now_ms()}
    storage.close()


def test_a_changed_setting_applies_to_the_next_append_only(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path)
    log.append(build_batch(records(5), compression=Compression.SNAPPY))
    storage.alter_topic_configs(TOPIC, {"compression.type": "lz4"})
    log.append(build_batch(records(5, 5), compression=Compression.SNAPPY))
    storage.alter_topic_configs(TOPIC, delete_configs=["compression.type"])
    log.append(build_batch(records(5, 10), compression=Compression.SNAPPY))
    assert [codec for codec, _ in stored(storage)] == [
        Compression.SNAPPY,
        Compression.LZ4,
        Compression.SNAPPY,
    ]
    storage.close()


def test_recompressed_is_what_append_would_store_and_append_keeps_it(tmp_path: Path) -> None:
    """The broker's split: :meth:`recompressed` in a worker thread, then :meth:`append`,
    which finds nothing left to recompress."""
    storage, log = open_topic(tmp_path, compression_type="gzip")
    two = build_batch(records(5), compression=Compression.LZ4) + build_batch(records(5, 5))
    assert log.recompresses(two)
    ready = log.recompressed(two)
    assert not log.recompresses(ready)
    assert log.recompressed(ready) is ready
    log.append(ready)
    assert [codec for codec, _ in stored(storage)] == [Compression.GZIP, Compression.GZIP]
    same = build_batch(records(3), compression=Compression.GZIP)
    assert not log.recompresses(same)
    assert log.recompressed(same) is same
    assert not log.recompresses(b"\x00" * 70)  # damaged: append refuses it, cheaply
    storage.close()


def test_a_batch_that_no_longer_fits_once_recompressed_is_too_large(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, compression_type="uncompressed", max_message_bytes="4096")
    batch = build_batch([NewRecord(b"a" * 10_000, b"k", (), 1)], compression=Compression.ZSTD)
    assert len(batch) < 4096
    with pytest.raises(RecordTooLargeError):
        log.append(batch)
    assert log.log_end_offset == 0
    storage.close()


def test_a_corrupt_compressed_batch_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, compression_type="zstd")
    damaged = with_payload(build_batch(records(), compression=Compression.GZIP), b"\x1f\x8b not gzip" * 9)
    with pytest.raises(CorruptRecordError):
        log.recompressed(bytes(damaged))
    with pytest.raises(CorruptRecordError):
        log.append(bytes(damaged))
    assert log.log_end_offset == 0
    storage.close()


def test_keyless_records_are_named_after_recompression(tmp_path: Path) -> None:
    storage, log = open_topic(tmp_path, compression_type="snappy", cleanup_policy="compact")
    sent = [NewRecord(b"v", None if i in (2, 9) else b"k", (), 1) for i in range(12)]
    with pytest.raises(InvalidRecordError) as refused:
        log.append(build_batch(sent, compression=Compression.LZ4))
    assert [i for i, _ in refused.value.record_errors] == [2, 9]
    storage.close()


@pytest.mark.parametrize("value", COMPRESSION_TYPES)
def test_kafkas_values_are_accepted(tmp_path: Path, value: str) -> None:
    storage, log = open_topic(tmp_path, compression_type=value)
    assert log.config.compression_type == value
    assert storage.topic(TOPIC).config.as_strings()["compression.type"] == value
    storage.close()


@pytest.mark.parametrize("value", ["GZIP", "none", "brotli", "", "zstd "])
def test_other_values_are_refused_naming_the_valid_ones(tmp_path: Path, value: str) -> None:
    storage = Storage.open(tmp_path)
    with pytest.raises(InvalidConfigError, match="producer, uncompressed, zstd, lz4, snappy, gzip"):
        storage.create_topic(TOPIC, 1, {"compression.type": value})
    storage.create_topic(TOPIC, 1)
    with pytest.raises(InvalidConfigError, match=r"compression\.type"):
        storage.alter_topic_configs(TOPIC, {"compression.type": value})
    storage.close()


def test_the_broker_level_setting_is_the_default_of_topics_without_their_own(tmp_path: Path) -> None:
    """As Kafka's broker ``compression.type``: the default of every topic that does not set it."""
    storage, log = open_topic(tmp_path)
    storage.create_topic("own", 1, {"compression.type": "producer"})
    storage.alter_broker_configs("cluster", {"compression.type": "zstd"})
    assert log.config.compression_type == "zstd"
    log.append(build_batch(records(5), compression=Compression.LZ4))
    own = storage.log("own", 0)
    own.append(build_batch(records(5), compression=Compression.LZ4))
    assert [codec for codec, _ in stored(storage)] == [Compression.ZSTD]
    assert read_header(own.read(0, 1 << 20).data()).compression is Compression.LZ4
    with pytest.raises(InvalidConfigError):
        storage.alter_broker_configs("broker", {"compression.type": "brotli"})
    storage.close()
