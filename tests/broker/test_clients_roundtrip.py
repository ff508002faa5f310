"""confluent-kafka, kafka-python and aiokafka produce (every codec, keys, headers) to a
live broker and read everything back exactly — with their own and the other clients."""

from __future__ import annotations

import importlib.util

import pytest
from tests.broker import clients

from logtrove.testing import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

PRODUCERS = {
    "confluent": lambda b, t, m, codec: clients.produce_confluent(b, t, m, **{"compression.type": codec}),
    "kafka-python": lambda b, t, m, codec: clients.produce_kafka_python(
        b, t, m, compression_type=None if codec == "none" else codec
    ),
    "aiokafka": lambda b, t, m, codec: clients.produce_aiokafka(
        b, t, m, compression_type=None if codec == "none" else codec
    ),
}
CONSUMERS = {
    "confluent": clients.consume_confluent,
    "kafka-python": clients.consume_kafka_python,
    "aiokafka": clients.consume_aiokafka,
}
# kafka-python compresses through optional packages (aiokafka uses cramjam, a dependency)
_CODEC_MODULES = {"snappy": "snappy", "lz4": "lz4", "zstd": "zstandard"}


def _messages(n: int, tag: str) -> list[clients.Message]:
    out: list[clients.Message] = []
    for i in range(n):
        key = None if i % 7 == 3 else f"key-{i % 13}".encode()
        value = None if i % 11 == 5 and key is not None else f"{tag} value {i} ".encode() * (1 + i % 5)
        headers = [("id", f"m{i}".encode()), ("tag", b"A" if i % 2 else b"B")] if i % 3 else []
        out.append((key, value, headers))
    return out


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(PRODUCERS))
def test_client_produces_and_every_client_reads_back_exactly(
    shared_broker: BrokerProcess, client: str, codec: str
) -> None:
    if (
        client == "kafka-python"
        and codec in _CODEC_MODULES
        and importlib.util.find_spec(_CODEC_MODULES[codec]) is None
    ):
        pytest.skip(f"{client} needs the {_CODEC_MODULES[codec]} package for {codec}")
    topic = f"rt-{client}-{codec}"
    messages = _messages(300, topic)
    PRODUCERS[client](shared_broker.bootstrap, topic, messages, codec)
    consumers = [client] if codec != "none" else list(CONSUMERS)
    for reader in consumers:
        got = CONSUMERS[reader](shared_broker.bootstrap, topic, len(messages))
        assert got == messages, f"{reader} read back something else than {client} produced"
