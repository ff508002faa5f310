"""One enum names every API key, as Kafka and kio name them."""

from __future__ import annotations

from kio.schema.index import api_key_map

from logtrove.broker.apis import build_api_table
from logtrove.wire import ApiKey


def test_every_key_kio_knows_has_its_kafka_name() -> None:
    assert {key.value: key.name for key in ApiKey} == {k: name.upper() for k, name in api_key_map.items()}


def test_the_broker_table_is_keyed_by_the_enum() -> None:
    assert all(isinstance(key, ApiKey) for key in build_api_table())
