"""DescribeConfigs and IncrementalAlterConfigs for topic configs.

The configs are storage's (:data:`logtrove.storage.CONFIG_DEFS`, Kafka names). A value
set on the topic is reported with source ``DYNAMIC_TOPIC_CONFIG`` (1), every other one
with ``DEFAULT_CONFIG`` (5). Broker resources are described with no configs. Alter
operations: SET (0), DELETE (1), and APPEND (2) / SUBTRACT (3) on comma-separated lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.broker.protocol import error_code
from logtrove.storage import CONFIG_BY_NAME, StorageError, TopicConfig

if TYPE_CHECKING:
    from logtrove.broker.server import Broker, Reply, Request

TOPIC = 2
BROKER = 4
SOURCE_TOPIC = 1
SOURCE_DEFAULT = 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _describe_topic(broker: Broker, name: str, keys: Any, documentation: bool) -> list[dict[str, Any]]:
    info = broker.storage.topic(name)
    values = info.config.as_strings()
    wanted = list(values) if keys is None else [k for k in keys if k in values]
    return [
        {
            "name": key,
            "value": values[key],
            "read_only": False,
            "config_source": SOURCE_TOPIC if key in info.overrides else SOURCE_DEFAULT,
            "is_default": key not in info.overrides,
            "is_sensitive": False,
            "synonyms": [],
            "documentation": CONFIG_BY_NAME[key].doc if documentation else None,
        }
        for key in wanted
    ]


async def handle_describe_configs(broker: Broker, request: Request) -> Reply:
    body = request.body
    documentation = bool(getattr(body, "include_documentation", False))
    results = []
    for res in body.resources:
        result: dict[str, Any] = {
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
            "configs": [],
        }
        try:
            if res.resource_type == TOPIC:
                result["configs"] = _describe_topic(
                    broker, res.resource_name, res.configuration_keys, documentation
                )
            elif res.resource_type != BROKER:
                result["error_code"] = ErrorCode.invalid_request
                result["error_message"] = f"resource type {res.resource_type} is not supported"
        except StorageError as exc:
            result["error_code"] = error_code(exc)
            result["error_message"] = str(exc)
        results.append(result)
    return {"results": results}


def _changes(current: dict[str, str], configs: Any) -> tuple[dict[str, str], list[str]]:
    """The overrides to set and the names to delete for one resource."""
    set_configs: dict[str, str] = {}
    deletes: list[str] = []
    for c in configs:
        if c.config_operation == SET:
            set_configs[c.name] = c.value or ""
        elif c.config_operation == DELETE:
            deletes.append(c.name)
        else:
            items = [v for v in current.get(c.name, "").split(",") if v]
            given = [v for v in (c.value or "").split(",") if v]
            if c.config_operation == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            set_configs[c.name] = ",".join(items)
    return set_configs, deletes


async def handle_incremental_alter_configs(broker: Broker, request: Request) -> Reply:
    body = request.body
    responses = []
    for res in body.resources:
        result: dict[str, Any] = {"resource_type": res.resource_type, "resource_name": res.resource_name}
        try:
            if res.resource_type != TOPIC:
                result["error_code"] = ErrorCode.invalid_request
                result["error_message"] = "only topic configs can be altered"
            else:
                info = broker.storage.topic(res.resource_name)
                set_configs, deletes = _changes(info.config.as_strings(), res.configs)
                if body.validate_only:
                    merged = {k: v for k, v in info.overrides.items() if k not in deletes}
                    TopicConfig.from_overrides({**merged, **set_configs})
                else:
                    broker.storage.alter_topic_configs(res.resource_name, set_configs, deletes)
        except StorageError as exc:
            result["error_code"] = error_code(exc)
            result["error_message"] = str(exc)
        responses.append(result)
    return {"responses": responses}
