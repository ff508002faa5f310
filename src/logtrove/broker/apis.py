"""The table of served APIs, and ApiVersions, which advertises exactly that table.

Version ranges are what the handlers implement, clipped to what kio can decode.
librdkafka needs Produce ≥ 3 and Fetch ≥ 4 to use RecordBatch v2, and minimums of 0
for the group APIs and FindCoordinator and 1 for ListOffsets / OffsetFetch to enable
its consumer-group and by-time features, so the minimums stay that low.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map

from logtrove.broker import (
    acls_api,
    cluster,
    configs,
    consumer_groups_api,
    fetch,
    groups_api,
    offsets,
    produce,
    sasl,
    topics,
    txn_api,
    users_api,
)

if TYPE_CHECKING:
    from logtrove.broker.server import Api, Broker, Handler, Reply, Request

API_VERSIONS = 18


async def handle_api_versions(broker: Broker, request: Request) -> Reply:
    return {"error_code": 0, "api_keys": _api_keys(broker)}


def _api_keys(broker: Broker) -> list[dict[str, int]]:
    return [
        {"api_key": api.key, "min_version": api.min_version, "max_version": api.max_version}
        for api in sorted(broker.apis.values(), key=lambda a: a.key)
    ]


def unsupported_api_versions(broker: Broker) -> bytes:
    """The body of an ApiVersions v0 response with UNSUPPORTED_VERSION and the key list."""
    from kio.schema.api_versions.v0.response import ApiVersionsResponse

    from logtrove.broker.protocol import build, encode

    data: dict[str, Any] = {"error_code": ErrorCode.unsupported_version, "api_keys": _api_keys(broker)}
    body: bytes = encode(build(ApiVersionsResponse, data))
    return body


# api key: (handler, lowest version served, highest version served)
_TABLE: dict[int, tuple[Handler, int, int]] = {
    0: (produce.handle_produce, 3, 11),
    1: (fetch.handle_fetch, 4, 16),
    2: (offsets.handle_list_offsets, 1, 9),
    3: (topics.handle_metadata, 0, 12),
    8: (groups_api.handle_offset_commit, 2, 9),
    9: (groups_api.handle_offset_fetch, 1, 9),
    10: (groups_api.handle_find_coordinator, 0, 6),
    11: (groups_api.handle_join_group, 0, 9),
    12: (groups_api.handle_heartbeat, 0, 4),
    13: (groups_api.handle_leave_group, 0, 5),
    14: (groups_api.handle_sync_group, 0, 5),
    15: (groups_api.handle_describe_groups, 0, 6),
    16: (groups_api.handle_list_groups, 0, 5),
    17: (sasl.handle_sasl_handshake, 0, 1),
    18: (handle_api_versions, 0, 4),
    19: (topics.handle_create_topics, 2, 7),
    20: (topics.handle_delete_topics, 1, 6),
    21: (offsets.handle_delete_records, 0, 2),
    22: (produce.handle_init_producer_id, 0, 5),
    23: (offsets.handle_offset_for_leader_epoch, 2, 4),
    24: (txn_api.handle_add_partitions_to_txn, 0, 4),
    25: (txn_api.handle_add_offsets_to_txn, 0, 4),
    26: (txn_api.handle_end_txn, 0, 4),
    28: (txn_api.handle_txn_offset_commit, 0, 4),
    29: (acls_api.handle_describe_acls, 1, 3),
    30: (acls_api.handle_create_acls, 1, 3),
    31: (acls_api.handle_delete_acls, 1, 3),
    32: (configs.handle_describe_configs, 1, 4),
    33: (configs.handle_alter_configs, 0, 2),
    35: (cluster.handle_describe_log_dirs, 1, 4),
    36: (sasl.handle_sasl_authenticate, 0, 2),
    37: (topics.handle_create_partitions, 0, 3),
    42: (groups_api.handle_delete_groups, 0, 2),
    43: (cluster.handle_elect_leaders, 0, 2),
    44: (configs.handle_incremental_alter_configs, 0, 1),
    45: (cluster.handle_alter_partition_reassignments, 0, 0),
    46: (cluster.handle_list_partition_reassignments, 0, 0),
    47: (groups_api.handle_offset_delete, 0, 0),
    50: (users_api.handle_describe_user_scram_credentials, 0, 0),
    51: (users_api.handle_alter_user_scram_credentials, 0, 0),
    60: (cluster.handle_describe_cluster, 0, 2),
    61: (cluster.handle_describe_producers, 0, 0),
    65: (txn_api.handle_describe_transactions, 0, 0),
    66: (txn_api.handle_list_transactions, 0, 1),
    68: (consumer_groups_api.handle_consumer_group_heartbeat, 0, 1),
    69: (consumer_groups_api.handle_consumer_group_describe, 0, 1),
}


def build_api_table() -> dict[int, Api]:
    """The served APIs, each version range clipped to the versions kio knows."""
    from logtrove.broker.server import Api

    table = {}
    for key, (handler, low, high) in _TABLE.items():
        known = schema_name_map[api_key_map[key]]
        lo, hi = max(low, min(known)), min(high, max(known))
        table[key] = Api(key, lo, hi, handler)
    return table
