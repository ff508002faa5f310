"""The table of served APIs, and ApiVersions, which advertises exactly that table.

Each handler declares its API key, the versions it implements and its authorization rule
beside its definition (``@serves(ApiKey.FETCH, 4, 16, access=...)``,
:func:`~logtrove.broker.context.serves`, :mod:`~logtrove.broker.access`); the table
collects the declarations of :data:`HANDLER_MODULES` and clips each range to what kio can
decode.
librdkafka needs Produce ≥ 3 and Fetch ≥ 4 to use RecordBatch v2, and minimums of 0
for the group APIs and FindCoordinator and 1 for ListOffsets / OffsetFetch to enable
its consumer-group and by-time features, so the minimums stay that low.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map

from logtrove.broker import (
    acls_api,
    cluster,
    configs_api,
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
from logtrove.broker.access import no_acl
from logtrove.broker.context import Api, declared_apis, serves
from logtrove.wire import ApiKey

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request


@serves(ApiKey.API_VERSIONS, 0, 4, access=no_acl("clients ask it before they authenticate"))
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


# the modules whose handlers declare what they serve (@serves); this one has ApiVersions
HANDLER_MODULES = (
    produce,
    fetch,
    offsets,
    topics,
    groups_api,
    sasl_api,
    txn_api,
    acls_api,
    configs_api,
    cluster,
    users_api,
    consumer_groups_api,
)


def build_api_table() -> dict[int, Api]:
    """The served APIs, as their handlers declare them, each version range clipped to the
    versions kio knows. Two handlers declaring one key is a programming error."""
    table: dict[int, Api] = {}
    for module in (*HANDLER_MODULES, sys.modules[__name__]):
        for api in declared_apis(module):
            if api.key in table:
                raise RuntimeError(f"api key {api.key} is declared twice ({module.__name__})")
            known = schema_name_map[api_key_map[api.key]]
            lo, hi = max(api.min_version, min(known)), min(api.max_version, max(known))
            table[api.key] = Api(api.key, lo, hi, api.handler, api.rule)
    return dict(sorted(table.items()))
