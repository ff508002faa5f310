"""The request bodies the clients and the mirror share encode as Kafka requests of the
versions they are sent at, and read back with what was asked."""

from __future__ import annotations

from typing import Any

from kio.index import load_request_schema
from kio.serial import entity_reader

from logtrove.wire import (
    TOPIC_RESOURCE,
    ApiKey,
    describe_configs_body,
    encode_request,
    find_coordinator_body,
    offset_fetch_body,
    offset_for_leader_epoch_body,
)


def _round_trip(api_key: ApiKey, version: int, body: dict[str, Any]) -> Any:
    """The request body kio reads back from the encoded request."""
    frame = encode_request(api_key, version, 7, "test", body)
    req_cls = load_request_schema(api_key, version)
    header, used = entity_reader(req_cls.__header_schema__)(frame, 0)
    assert (header.request_api_key, header.correlation_id) == (int(api_key), 7)
    value, size = entity_reader(req_cls)(frame, used)
    assert used + size == len(frame)  # nothing left over
    return value


def test_describe_configs_names_the_keys_or_all_of_them() -> None:
    some = _round_trip(ApiKey.DESCRIBE_CONFIGS, 4, describe_configs_body(["a", "b"], ["retention.ms"]))
    assert [(int(r.resource_type), r.resource_name) for r in some.resources] == [
        (TOPIC_RESOURCE, "a"),
        (TOPIC_RESOURCE, "b"),
    ]
    assert [list(r.configuration_keys) for r in some.resources] == [["retention.ms"], ["retention.ms"]]
    every = _round_trip(ApiKey.DESCRIBE_CONFIGS, 4, describe_configs_body(["a"]))
    assert every.resources[0].configuration_keys is None


def test_offset_for_leader_epoch_asks_each_partition_as_a_consumer() -> None:
    req = _round_trip(
        ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, offset_for_leader_epoch_body("t", [(0, 5, 4), (2, -1, 0)])
    )
    assert int(req.replica_id) == -1
    [topic] = req.topics
    assert topic.topic == "t"
    assert [
        (int(p.partition), int(p.current_leader_epoch), int(p.leader_epoch)) for p in topic.partitions
    ] == [
        (0, 5, 4),
        (2, -1, 0),
    ]


def test_offset_fetch_of_every_commit_or_of_some_partitions() -> None:
    every = _round_trip(ApiKey.OFFSET_FETCH, 8, offset_fetch_body("g"))
    assert [(g.group_id, g.topics) for g in every.groups] == [("g", None)]
    some = _round_trip(ApiKey.OFFSET_FETCH, 8, offset_fetch_body("g", {"t": [1, 3]}))
    [topic] = some.groups[0].topics
    assert (topic.name, [int(p) for p in topic.partition_indexes]) == ("t", [1, 3])
    assert some.require_stable is False


def test_find_coordinator_asks_for_a_group() -> None:
    req = _round_trip(ApiKey.FIND_COORDINATOR, 3, find_coordinator_body("g"))
    assert (req.key, int(req.key_type)) == ("g", 0)
