"""``compression.type`` through the broker, as Kafka serves it (issue 14, finding 6):
accepted in CreateTopics, DescribeConfigs, IncrementalAlterConfigs and the CLI; a value
Kafka does not know is INVALID_CONFIG; a producer's lz4 batches sent to a gzip topic are
stored gzip (recompressed in a worker thread) and every client reads the same records.
The broker used to refuse ``compression.type`` as an unknown config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kio.schema.errors import ErrorCode
from tests.broker import clients
from tests.broker.raw_produce import log_end, produce_raw
from tests.records.helpers import with_payload

from logtrove.records import Compression, NewRecord, build_batch, read_header
from logtrove.testing import BrokerProcess, WireClient, cli_in


def messages(n: int, tag: str) -> list[clients.Message]:
    return [
        (
            b"k%d" % (i % 17),
            b'{"order": %d, "user": "u-%06d", "status": "paid", "amount": 129.90, "src": "%s"}'
            % (i, i % 1000, tag.encode()),
            [("trace", b"t%d" % i)],
        )
        for i in range(n)
    ]


def disk_codecs(broker: BrokerProcess, topic: str) -> list[Compression]:
    """The codec of every batch in the partition's segment files, read from disk."""
    out = []
    for segment in sorted(broker.data.glob(f"{topic}-0/*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos < len(data):
            header = read_header(data, pos)
            out.append(header.compression)
            pos += header.size
    return out


def create(broker: BrokerProcess, topic: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)


def test_librdkafka_lz4_to_a_gzip_topic_is_stored_gzip_and_read_back_by_every_client(
    shared_broker: BrokerProcess,
) -> None:
    topic = "ct-librdkafka"
    create(shared_broker, topic, **{"compression.type": "gzip"})
    sent = messages(500, topic)
    clients.produce_confluent(
        shared_broker.bootstrap,
        topic,
        sent,
        **{"compression.type": "lz4", "enable.idempotence": True, "linger.ms": 50},
    )
    codecs = disk_codecs(shared_broker, topic)
    assert codecs and set(codecs) == {Compression.GZIP}
    assert len(codecs) < len(sent)  # batches of many records, each recompressed whole
    assert clients.consume_confluent(shared_broker.bootstrap, topic, len(sent)) == sent
    assert clients.consume_kafka_python(shared_broker.bootstrap, topic, len(sent)) == sent


def test_kafka_python_lz4_to_a_gzip_topic_is_stored_gzip(shared_broker: BrokerProcess) -> None:
    topic = "ct-kafka-python"
    create(shared_broker, topic, **{"compression.type": "gzip"})
    sent = messages(300, topic)
    clients.produce_kafka_python(shared_broker.bootstrap, topic, sent, compression_type="lz4")
    assert set(disk_codecs(shared_broker, topic)) == {Compression.GZIP}
    assert clients.consume_kafka_python(shared_broker.bootstrap, topic, len(sent)) == sent
    assert clients.consume_confluent(shared_broker.bootstrap, topic, len(sent)) == sent


def test_producer_keeps_the_producers_codec(shared_broker: BrokerProcess) -> None:
    topic = "ct-producer"
    create(shared_broker, topic)
    sent = messages(100, topic)
    clients.produce_confluent(shared_broker.bootstrap, topic, sent, **{"compression.type": "lz4"})
    assert set(disk_codecs(shared_broker, topic)) == {Compression.LZ4}
    assert clients.consume_confluent(shared_broker.bootstrap, topic, len(sent)) == sent


def test_admin_apis_accept_describe_alter_and_refuse_unknown_values(shared_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    bad = admin.create_topics([NewTopic("ct-bad", 1, 1, config={"compression.type": "brotli"})])["ct-bad"]
    with pytest.raises(KafkaException) as refused:
        bad.result(10)
    assert refused.value.args[0].code() == ErrorCode.invalid_config.value
    assert "producer, uncompressed, zstd, lz4, snappy, gzip" in refused.value.args[0].str()

    topic = "ct-admin"
    create(shared_broker, topic, **{"compression.type": "snappy"})
    resource = ConfigResource(ResourceType.TOPIC, topic)

    def described() -> ConfigEntry:
        return admin.describe_configs([resource])[resource].result(10)["compression.type"]

    entry = described()
    assert (entry.value, entry.source) == ("snappy", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    def alter(value: str) -> None:
        op = ConfigEntry("compression.type", value, incremental_operation=AlterConfigOpType.SET)
        admin.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[op])]
        )[resource].result(10)

    alter("zstd")
    assert described().value == "zstd"
    with pytest.raises(KafkaException) as refused:
        alter("ZSTD")
    assert refused.value.args[0].code() == ErrorCode.invalid_config.value
    assert described().value == "zstd"

    sent = messages(50, topic)
    clients.produce_kafka_python(shared_broker.bootstrap, topic, sent, compression_type="gzip")
    assert set(disk_codecs(shared_broker, topic)) == {Compression.ZSTD}

    create(shared_broker, "ct-default")
    default = ConfigResource(ResourceType.TOPIC, "ct-default")
    entry = admin.describe_configs([default])[default].result(10)["compression.type"]
    assert (entry.value, entry.source) == ("producer", ConfigSource.DEFAULT_CONFIG.value)


def test_a_batch_that_does_not_decompress_is_refused_and_the_broker_serves_on(
    shared_broker: BrokerProcess,
) -> None:
    topic = "ct-corrupt"
    create(shared_broker, topic, **{"compression.type": "zstd"})
    good = build_batch([NewRecord(b"v%d" % i, b"k") for i in range(20)], compression=Compression.GZIP)
    damaged = bytes(with_payload(good, b"\x1f\x8b\x08 this is not a gzip stream" * 4))
    with WireClient(shared_broker.port) as client:
        code, message, _ = produce_raw(client, topic, damaged)
        assert code == ErrorCode.invalid_record  # as for any batch that does not decompress
        assert message is not None and "gzip" in message
        assert produce_raw(client, topic, good)[0] == 0
        assert log_end(client, topic) == 20
    assert disk_codecs(shared_broker, topic) == [Compression.ZSTD]


def test_the_cli_creates_topics_with_it_and_refuses_other_values(
    shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    remote = ["--bootstrap", shared_broker.bootstrap]
    out = cli_in(tmp_path, "topics", "create", "ct-cli", "--config", "compression.type=lz4", *remote)
    assert out.returncode == 0, out.stderr
    described = json.loads(cli_in(tmp_path, "topics", "describe", "ct-cli", "--json", *remote).stdout)
    assert {"name": "compression.type", "value": "lz4", "source": "topic"} in described["configs"]
    bad = cli_in(tmp_path, "topics", "create", "ct-cli-bad", "--config", "compression.type=lzma", *remote)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr

    data = str(tmp_path / "offline")
    out = cli_in(tmp_path, "topics", "create", "t", "-c", "compression.type=uncompressed", "--data", data)
    assert out.returncode == 0, out.stderr
    out = cli_in(tmp_path, "topics", "describe", "t", "--json", "--data", data)
    assert json.loads(out.stdout)["configs"]["compression.type"] == "uncompressed"
    bad = cli_in(tmp_path, "topics", "create", "u", "-c", "compression.type=none", "--data", data)
    assert bad.returncode != 0
    assert "producer, uncompressed, zstd, lz4, snappy, gzip" in bad.stdout + bad.stderr
