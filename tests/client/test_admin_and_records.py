"""The client's one-request functions against a real broker: topics, offsets, configs,
and produce/fetch of record batches, each answer checked against what was sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from logtrove.client import KafkaClient, KafkaProtocolError
from logtrove.client.admin import (
    alter_topic_configs,
    create_topic,
    delete_topic,
    ensure_topic,
    grow_partitions,
    list_offsets,
    topic_configs,
    topic_partitions,
)
from logtrove.client.records import fetch, produce, produce_batches
from logtrove.records import NewRecord
from logtrove.testing import BrokerProcess, free_port
from logtrove.wire import EARLIEST, LATEST


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaClient]:
    data: Path = tmp_path_factory.mktemp("client") / "data"
    with BrokerProcess(data, free_port(), "--no-indexer") as broker, KafkaClient(broker.bootstrap) as client:
        yield client


def test_a_topic_is_created_once_grown_altered_and_deleted(client: KafkaClient) -> None:
    assert topic_partitions(client, "admin-t") is None
    create_topic(client, "admin-t", 2, {"retention.ms": "60000"})
    assert ensure_topic(client, "admin-t", 5) == (2, False)
    assert ensure_topic(client, "admin-new", 3) == (3, True)
    with pytest.raises(KafkaProtocolError, match="TOPIC_ALREADY_EXISTS"):
        create_topic(client, "admin-t", 2)
    configs = {c.name: c for c in topic_configs(client, "admin-t")}
    assert (configs["retention.ms"].value, configs["retention.ms"].set_on_topic) == ("60000", True)
    alter_topic_configs(client, "admin-t", {"cleanup.policy": "compact"}, ["retention.ms"])
    configs = {c.name: c for c in topic_configs(client, "admin-t")}
    assert configs["cleanup.policy"].value == "compact" and not configs["retention.ms"].set_on_topic
    grow_partitions(client, "admin-t", 4)
    assert topic_partitions(client, "admin-t") == 4
    delete_topic(client, "admin-t")
    assert topic_partitions(client, "admin-t") is None


def test_batches_produced_come_back_with_their_offsets(client: KafkaClient) -> None:
    create_topic(client, "records-t", 2)
    batches = {0: [[NewRecord(b"a"), NewRecord(b"b")], [NewRecord(b"c")]], 1: [[NewRecord(b"z")]]}
    summary = produce_batches(client, "records-t", batches)
    assert summary == [
        {"partition": 0, "records": 3, "batches": 2, "first_offset": 0, "last_offset": 2},
        {"partition": 1, "records": 1, "batches": 1, "first_offset": 0, "last_offset": 0},
    ]
    assert produce(client, "records-t", 1, [NewRecord(b"y", key=b"k")]) == 1
    assert list_offsets(client, "records-t", [0, 1], EARLIEST) == {0: 0, 1: 0}
    assert list_offsets(client, "records-t", [0, 1], LATEST) == {0: 3, 1: 2}
    got = fetch(client, "records-t", 0, 1)
    assert [(r.offset, r.value) for r in got.records] == [(1, b"b"), (2, b"c")]
    assert (got.next_offset, got.log_end_offset) == (3, 3)
    with pytest.raises(KafkaProtocolError, match="OFFSET_OUT_OF_RANGE"):
        fetch(client, "records-t", 0, 9)
