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
    sasl_api,
    topics,
    txn_api,
    users_api,
)
from logtrove.broker.context import Api
from logtrove.wire import ApiKey

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext, Handler
    from logtrove.broker.requests import Reply, Request


async def handle_api_versions(broker: BrokerContext, request: Request) -> Reply:
    return {"error_code": 0, "api_keys": _api_keys(broker)}


def _api_keys(broker: BrokerContext) -> list[dict[str, int]]:
    return [
        {"api_key": api.key, "min_version": api.min_version, "max_version": api.max_version}
        for api in sorted(broker.apis.values(), key=lambda a: a.key)
    ]


def unsupported_api_versions(broker: BrokerContext) -> bytes:
    """The body of an ApiVersions v0 response with UNSUPPORTED_VERSION and the key list."""
    from kio.schema.api_versions.v0.response import ApiVersionsResponse

    from logtrove.wire import build, encode

    data: dict[str, Any] = {"error_code": ErrorCode.unsupported_version, "api_keys": _api_keys(broker)}
    body: bytes = encode(build(ApiVersionsResponse, data))
    return body


# api key: (handler, lowest version served, highest version served)
_TABLE: dict[ApiKey, tuple[Handler, int, int]] = {
    ApiKey.PRODUCE: (produce.handle_produce, 3, 11),
    ApiKey.FETCH: (fetch.handle_fetch, 4, 16),
    ApiKey.LIST_OFFSETS: (offsets.handle_list_offsets, 1, 9),
    ApiKey.METADATA: (topics.handle_metadata, 0, 12),
    ApiKey.OFFSET_COMMIT: (groups_api.handle_offset_commit, 2, 9),
    ApiKey.OFFSET_FETCH: (groups_api.handle_offset_fetch, 1, 9),
    ApiKey.FIND_COORDINATOR: (groups_api.handle_find_coordinator, 0, 6),
    ApiKey.JOIN_GROUP: (groups_api.handle_join_group, 0, 9),
    ApiKey.HEARTBEAT: (groups_api.handle_heartbeat, 0, 4),
    ApiKey.LEAVE_GROUP: (groups_api.handle_leave_group, 0, 5),
    ApiKey.SYNC_GROUP: (groups_api.handle_sync_group, 0, 5),
    ApiKey.DESCRIBE_GROUPS: (groups_api.handle_describe_groups, 0, 6),
    ApiKey.LIST_GROUPS: (groups_api.handle_list_groups, 0, 5),
    ApiKey.SASL_HANDSHAKE: (sasl_api.handle_sasl_handshake, 0, 1),
    ApiKey.API_VERSIONS: (handle_api_versions, 0, 4),
    ApiKey.CREATE_TOPICS: (topics.handle_create_topics, 2, 7),
    ApiKey.DELETE_TOPICS: (topics.handle_delete_topics, 1, 6),
    ApiKey.DELETE_RECORDS: (offsets.handle_delete_records, 0, 2),
    ApiKey.INIT_PRODUCER_ID: (produce.handle_init_producer_id, 0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (offsets.handle_offset_for_leader_epoch, 2, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (txn_api.handle_add_partitions_to_txn, 0, 4),
    ApiKey.ADD_OFFSETS_TO_TXN: (txn_api.handle_add_offsets_to_txn, 0, 4),
    ApiKey.END_TXN: (txn_api.handle_end_txn, 0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (txn_api.handle_txn_offset_commit, 0, 4),
    ApiKey.DESCRIBE_ACLS: (acls_api.handle_describe_acls, 1, 3),
    ApiKey.CREATE_ACLS: (acls_api.handle_create_acls, 1, 3),
    ApiKey.DELETE_ACLS: (acls_api.handle_delete_acls, 1, 3),
    ApiKey.DESCRIBE_CONFIGS: (configs.handle_describe_configs, 1, 4),
    ApiKey.ALTER_CONFIGS: (configs.handle_alter_configs, 0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (cluster.handle_describe_log_dirs, 1, 4),
    ApiKey.SASL_AUTHENTICATE: (sasl_api.handle_sasl_authenticate, 0, 2),
    ApiKey.CREATE_PARTITIONS: (topics.handle_create_partitions, 0, 3),
    ApiKey.DELETE_GROUPS: (groups_api.handle_delete_groups, 0, 2),
    ApiKey.ELECT_LEADERS: (cluster.handle_elect_leaders, 0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (configs.handle_incremental_alter_configs, 0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (cluster.handle_alter_partition_reassignments, 0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (cluster.handle_list_partition_reassignments, 0, 0),
    ApiKey.OFFSET_DELETE: (groups_api.handle_offset_delete, 0, 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (users_api.handle_describe_user_scram_credentials, 0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (users_api.handle_alter_user_scram_credentials, 0, 0),
    ApiKey.DESCRIBE_CLUSTER: (cluster.handle_describe_cluster, 0, 2),
    ApiKey.DESCRIBE_PRODUCERS: (cluster.handle_describe_producers, 0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (txn_api.handle_describe_transactions, 0, 0),
    ApiKey.LIST_TRANSACTIONS: (txn_api.handle_list_transactions, 0, 1),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (consumer_groups_api.handle_consumer_group_heartbeat, 0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (consumer_groups_api.handle_consumer_group_describe, 0, 1),
}


def build_api_table() -> dict[int, Api]:
    """The served APIs, each version range clipped to the versions kio knows."""

    table: dict[int, Api] = {}
    for key, (handler, low, high) in _TABLE.items():
        known = schema_name_map[api_key_map[key]]
        lo, hi = max(low, min(known)), min(high, max(known))
        table[key] = Api(key, lo, hi, handler)
    return table
