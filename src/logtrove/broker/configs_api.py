"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics, the broker and
groups.

Topic configs are storage's (:data:`logtrove.storage.CONFIG_DEFS`, Kafka names). Group
configs (resource type 32, KIP-848) are the consumer protocol's session timeout and
heartbeat interval per group (:mod:`logtrove.groups.group_configs`), source
``GROUP_CONFIG`` when the group sets them. With an authorizer, describing needs
DESCRIBE_CONFIGS and altering ALTER_CONFIGS on the topic, the group, or the cluster for the
broker. Broker configs are of three kinds:

* **static**: how this process was started (``broker.id``, ``listeners``,
  ``num.partitions``…); described read-only with source ``STATIC_BROKER_CONFIG``, and an
  attempt to alter one is refused for that resource (INVALID_REQUEST, as Kafka refuses a
  config that cannot be updated dynamically);
* **topic defaults** (``log.retention.ms``… see
  :mod:`logtrove.storage.broker_configs`): dynamic, at the broker level (resource name =
  broker id) or as the cluster default (resource name ``""``), and honoured: they are the
  value of every topic that does not override them;
* **custom**: any other name, kept and described back as Kafka keeps configs it does
  not know, with no effect in logtrove.

Sources, as Kafka numbers them: a topic override is ``DYNAMIC_TOPIC_CONFIG`` (1), a
broker-level value ``DYNAMIC_BROKER_CONFIG`` (2), a cluster default
``DYNAMIC_DEFAULT_BROKER_CONFIG`` (3), a start-up setting ``STATIC_BROKER_CONFIG`` (4),
a built-in default ``DEFAULT_CONFIG`` (5); with ``include_synonyms`` each topic config
lists the values it shadows, highest precedence first.

Each config's type (DescribeConfigs v3+ ``config_type``) is the one Kafka gives the same
name, so Kafka's tools show and check values the same way; logtrove's own topic configs
are strings and lists. A custom broker config is ``UNKNOWN``, as in Kafka.

Alter operations (IncrementalAlterConfigs): SET (0), DELETE (1), and APPEND (2) /
SUBTRACT (3) on comma-separated lists. AlterConfigs (the legacy API) replaces every
dynamic config of the resource with the given set. Each resource is answered on its
own: one bad resource never fails the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import Operation, ResourceType
from logtrove.broker.access import Check, Rule, per_resource
from logtrove.broker.context import serves
from logtrove.broker.errors import error_code
from logtrove.groups.group_configs import GROUP_CONFIG_DEFS
from logtrove.storage import CONFIG_BY_NAME, StorageError, TopicConfig
from logtrove.storage.broker_configs import (
    BROKER as BROKER_LEVEL,
)
from logtrove.storage.broker_configs import (
    CLUSTER,
    SYNONYMS,
    TOPIC_TO_BROKER,
    BrokerConfigs,
)
from logtrove.wire import ApiKey

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request

TOPIC = 2
BROKER = 4
GROUP = 32  # KIP-848 group configs (Kafka 4.0)
SOURCE_TOPIC = 1
SOURCE_BROKER = 2
SOURCE_CLUSTER_DEFAULT = 3
SOURCE_STATIC = 4
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_LEVEL_SOURCE = {BROKER_LEVEL: SOURCE_BROKER, CLUSTER: SOURCE_CLUSTER_DEFAULT}

# ConfigEntry.ConfigType as Kafka numbers it on the wire.
UNKNOWN, BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 0, 1, 2, 3, 5, 6, 7
CONFIG_TYPES: Mapping[str, int] = {
    # topic configs (and logtrove's own)
    "cleanup.policy": LIST,
    "compression.type": STRING,
    "delete.retention.ms": LONG,
    "file.delete.delay.ms": LONG,
    "flush.messages": LONG,
    "flush.ms": LONG,
    "index.interval.bytes": INT,
    "max.compaction.lag.ms": LONG,
    "max.message.bytes": INT,
    "message.timestamp.type": STRING,
    "min.cleanable.dirty.ratio": DOUBLE,
    "min.compaction.lag.ms": LONG,
    "retention.bytes": LONG,
    "retention.ms": LONG,
    "segment.bytes": INT,
    "segment.ms": LONG,
    "message.id.header": STRING,
    "message.tag.header": STRING,
    "index.headers": LIST,
    # group configs
    "consumer.session.timeout.ms": INT,
    "consumer.heartbeat.interval.ms": INT,
    # the broker's
    "broker.id": INT,
    "node.id": INT,
    "log.dirs": LIST,
    "listeners": LIST,
    "advertised.listeners": LIST,
    "num.partitions": INT,
    "auto.create.topics.enable": BOOLEAN,
    "offsets.topic.num.partitions": INT,
    "group.initial.rebalance.delay.ms": INT,
    "socket.request.max.bytes": INT,
    "fetch.max.bytes": INT,
    "connections.max.idle.ms": LONG,
    "log.cleanup.policy": LIST,
    "log.retention.ms": LONG,
    "log.retention.bytes": LONG,
    "log.segment.bytes": INT,
    "log.roll.ms": LONG,
    "log.index.interval.bytes": INT,
    "log.flush.interval.messages": LONG,
    "log.flush.interval.ms": LONG,
    "message.max.bytes": INT,
    "log.message.timestamp.type": STRING,
    "log.segment.delete.delay.ms": LONG,
    "log.cleaner.min.cleanable.ratio": DOUBLE,
    "log.cleaner.min.compaction.lag.ms": LONG,
    "log.cleaner.max.compaction.lag.ms": LONG,
    "log.cleaner.delete.retention.ms": LONG,
}


class ResourceError(Exception):
    """One resource of a request cannot be served: its error code and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _entry(
    name: str,
    value: str | None,
    source: int,
    *,
    read_only: bool = False,
    doc: str | None = None,
    synonyms: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "config_type": CONFIG_TYPES.get(name, UNKNOWN),
        "is_default": source == SOURCE_DEFAULT,
        "is_sensitive": False,
        "synonyms": synonyms or [],
        "documentation": doc,
    }


def _topic_synonyms(name: str, overrides: Mapping[str, str], dynamic: BrokerConfigs) -> list[dict[str, Any]]:
    """Every value ``name`` takes at each level, highest precedence first (Kafka's order)."""
    out = []
    if name in overrides:
        out.append({"name": name, "value": overrides[name], "source": SOURCE_TOPIC})
    broker_name = TOPIC_TO_BROKER.get(name)
    if broker_name is not None:
        for level in (BROKER_LEVEL, CLUSTER):
            value = dynamic.level(level).get(broker_name)
            if value is not None:
                out.append({"name": broker_name, "value": value, "source": _LEVEL_SOURCE[level]})
    out.append({"name": broker_name or name, "value": CONFIG_BY_NAME[name].default, "source": SOURCE_DEFAULT})
    return out


def _configs_rule(op: Operation) -> Rule:
    """``op`` on each resource named, by its type: a topic, a group, or the cluster for a
    broker (:func:`_check_access` asks)."""
    return per_resource(
        Check(ResourceType.TOPIC, op), Check(ResourceType.GROUP, op), Check(ResourceType.CLUSTER, op)
    )


def _check_access(
    broker: BrokerContext, request: Request, resource_type: int, name: str, op: Operation
) -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for the broker."""
    if resource_type == TOPIC and not broker.allowed(request, op, ResourceType.TOPIC, name):
        raise ResourceError(ErrorCode.topic_authorization_failed, f"{op.name} on topic {name!r} is needed")
    if resource_type == BROKER and not broker.allowed_cluster(request, op):
        raise ResourceError(ErrorCode.cluster_authorization_failed, f"{op.name} on the cluster is needed")
    if resource_type == GROUP and not broker.allowed(request, op, ResourceType.GROUP, name):
        raise ResourceError(ErrorCode.group_authorization_failed, f"{op.name} on group {name!r} is needed")


def _describe_group(
    broker: BrokerContext, group_id: str, keys: Any, documentation: bool
) -> list[dict[str, Any]]:
    """A group's consumer-protocol configs: its own (source GROUP_CONFIG) or the broker's
    (source STATIC_BROKER_CONFIG, from the serve flags)."""
    own = broker.group_configs.own(group_id)
    entries = [
        _entry(
            name,
            str(value),
            SOURCE_GROUP if name in own else SOURCE_STATIC,
            doc=GROUP_CONFIG_DEFS[name].doc if documentation else None,
        )
        for name, value in broker.group_configs.effective(group_id).items()
    ]
    return [e for e in entries if keys is None or e["name"] in keys]


def _alter_group(
    broker: BrokerContext,
    group_id: str,
    set_configs: dict[str, str],
    deletes: list[str],
    *,
    replace: bool,
    validate_only: bool,
) -> None:
    if replace:
        deletes = [k for k in broker.group_configs.own(group_id) if k not in set_configs]
    broker.group_configs.alter(group_id, set_configs, deletes, validate_only=validate_only)


def _describe_topic(
    broker: BrokerContext, name: str, keys: Any, documentation: bool, synonyms: bool
) -> list[dict[str, Any]]:
    info = broker.storage.topic(name)
    dynamic = broker.storage.broker_configs()
    values = info.config.as_strings()
    wanted = list(values) if keys is None else [k for k in keys if k in values]
    entries = []
    for key in wanted:
        chain = _topic_synonyms(key, info.overrides, dynamic)
        entries.append(
            _entry(
                key,
                values[key],
                chain[0]["source"],
                doc=CONFIG_BY_NAME[key].doc if documentation else None,
                synonyms=chain if synonyms else None,
            )
        )
    return entries


def _static_configs(broker: BrokerContext) -> dict[str, str]:
    """The start-up settings a broker describes read-only, Kafka-named."""
    c = broker.config
    return {
        "broker.id": str(broker.node_id),
        "node.id": str(broker.node_id),
        "log.dirs": str(broker.storage.path),
        "listeners": f"PLAINTEXT://{c.host}:{broker.bound_port}",
        "advertised.listeners": f"PLAINTEXT://{broker.host}:{broker.port}",
        "num.partitions": str(c.default_partitions),
        "auto.create.topics.enable": str(c.auto_create_topics).lower(),
        "offsets.topic.num.partitions": str(c.offsets_partitions),
        "group.initial.rebalance.delay.ms": str(c.initial_rebalance_delay_ms),
        "socket.request.max.bytes": str(c.max_frame_bytes),
        "fetch.max.bytes": str(c.fetch_max_bytes),
        "connections.max.idle.ms": str(c.connections_max_idle_ms),
    }


def _broker_level(broker: BrokerContext, resource_name: str) -> str:
    """The dynamic level a BROKER resource names: ``""`` the cluster default, the broker id
    this broker; any other id is not here (Kafka: INVALID_REQUEST)."""
    if resource_name == "":
        return CLUSTER
    if resource_name == str(broker.node_id):
        return BROKER_LEVEL
    raise ResourceError(
        ErrorCode.invalid_request,
        f"unexpected broker id {resource_name!r}: this broker is {broker.node_id}, or use '' for the cluster default",
    )


def _describe_broker(
    broker: BrokerContext, resource_name: str, keys: Any, synonyms: bool
) -> list[dict[str, Any]]:
    level = _broker_level(broker, resource_name)
    dynamic = broker.storage.broker_configs()
    entries: dict[str, dict[str, Any]] = {}
    if level == BROKER_LEVEL:
        for name, value in _static_configs(broker).items():
            entries[name] = _entry(name, value, SOURCE_STATIC, read_only=True)
        for name, topic_name in SYNONYMS.items():
            found = dynamic.effective(name)
            value, source = (
                (found[0], _LEVEL_SOURCE[found[1]])
                if found
                else (CONFIG_BY_NAME[topic_name].default, SOURCE_DEFAULT)
            )
            entries[name] = _entry(name, value, source)
        levels: tuple[str, ...] = (CLUSTER, BROKER_LEVEL)
    else:
        levels = (CLUSTER,)  # Kafka describes only what is set as the cluster default
    for lvl in levels:
        for name, value in dynamic.level(lvl).items():
            entries[name] = _entry(name, value, _LEVEL_SOURCE[lvl])
    if synonyms:
        for name, entry in entries.items():
            entry["synonyms"] = [{"name": name, "value": entry["value"], "source": entry["config_source"]}]
    wanted = entries if keys is None else [k for k in keys if k in entries]
    return [entries[k] for k in wanted]


@serves(ApiKey.DESCRIBE_CONFIGS, 1, 4, access=_configs_rule(Operation.DESCRIBE_CONFIGS))
async def handle_describe_configs(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    documentation = bool(getattr(body, "include_documentation", False))
    synonyms = bool(getattr(body, "include_synonyms", False))
    results = []
    for res in body.resources:
        result: dict[str, Any] = {
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
            "configs": [],
        }
        try:
            _check_access(broker, request, res.resource_type, res.resource_name, Operation.DESCRIBE_CONFIGS)
            if res.resource_type == TOPIC:
                result["configs"] = _describe_topic(
                    broker, res.resource_name, res.configuration_keys, documentation, synonyms
                )
            elif res.resource_type == GROUP:
                result["configs"] = _describe_group(
                    broker, res.resource_name, res.configuration_keys, documentation
                )
            elif res.resource_type == BROKER:
                result["configs"] = _describe_broker(
                    broker, res.resource_name, res.configuration_keys, synonyms
                )
            else:
                raise ResourceError(
                    ErrorCode.invalid_request, f"resource type {res.resource_type} is not supported"
                )
        except ResourceError as exc:
            result["error_code"], result["error_message"] = exc.code, str(exc)
        except StorageError as exc:
            result["error_code"] = error_code(exc)
            result["error_message"] = str(exc)
        results.append(result)
    return {"results": results}


def _changes(current: Mapping[str, str], configs: Any) -> tuple[dict[str, str], list[str]]:
    """The values to set and the names to delete for one resource."""
    set_configs: dict[str, str] = {}
    deletes: list[str] = []
    for c in configs:
        if c.config_operation == SET:
            set_configs[c.name] = c.value or ""
        elif c.config_operation == DELETE:
            deletes.append(c.name)
        elif c.config_operation in (APPEND, SUBTRACT):
            items = [v for v in current.get(c.name, "").split(",") if v]
            given = [v for v in (c.value or "").split(",") if v]
            if c.config_operation == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            set_configs[c.name] = ",".join(items)
        else:
            raise ResourceError(
                ErrorCode.invalid_request, f"unknown config operation {c.config_operation} for {c.name!r}"
            )
    return set_configs, deletes


def _alter_topic(
    broker: BrokerContext,
    name: str,
    set_configs: dict[str, str],
    deletes: list[str],
    *,
    replace: bool,
    validate_only: bool,
) -> None:
    info = broker.storage.topic(name)
    if replace:  # legacy AlterConfigs: the given set becomes the whole set of overrides
        deletes = [k for k in info.overrides if k not in set_configs]
    if validate_only:
        broker.storage.check_client_change(name, configs=[*set_configs, *deletes])
        merged = {k: v for k, v in info.overrides.items() if k not in deletes}
        TopicConfig.from_overrides({**merged, **set_configs})
    else:
        broker.storage.alter_topic_configs(name, set_configs, deletes)


def _alter_broker(
    broker: BrokerContext,
    resource_name: str,
    set_configs: dict[str, str],
    deletes: list[str],
    *,
    replace: bool,
    validate_only: bool,
) -> None:
    level = _broker_level(broker, resource_name)
    static = sorted((set_configs.keys() | set(deletes)) & _static_configs(broker).keys())
    if static:
        raise ResourceError(
            ErrorCode.invalid_request,
            f"cannot update these configs dynamically: {', '.join(static)} (set them when starting `logtrove serve`)",
        )
    broker.storage.alter_broker_configs(
        level, set_configs, deletes, replace=replace, validate_only=validate_only
    )


def _current(broker: BrokerContext, resource_type: int, name: str) -> Mapping[str, str]:
    """Values APPEND / SUBTRACT start from: the effective ones."""
    if resource_type == TOPIC:
        return broker.storage.topic(name).config.as_strings()
    if resource_type == GROUP:
        return {k: str(v) for k, v in broker.group_configs.effective(name).items()}
    dynamic = broker.storage.broker_configs()
    level = _broker_level(broker, name)
    out = {b: CONFIG_BY_NAME[t].default for b, t in SYNONYMS.items()}
    out.update(dynamic.cluster)
    if level == BROKER_LEVEL:
        out.update(dynamic.broker)
    return out


def _alter(
    broker: BrokerContext,
    request: Request,
    res: Any,
    set_configs: dict[str, str],
    deletes: list[str],
    *,
    replace: bool,
    validate_only: bool,
) -> dict[str, Any]:
    result: dict[str, Any] = {"resource_type": res.resource_type, "resource_name": res.resource_name}
    alter = {TOPIC: _alter_topic, BROKER: _alter_broker, GROUP: _alter_group}.get(res.resource_type)
    try:
        _check_access(broker, request, res.resource_type, res.resource_name, Operation.ALTER_CONFIGS)
        if alter is None:
            raise ResourceError(
                ErrorCode.invalid_request,
                f"resource type {res.resource_type} cannot be altered here (only topics (2), the broker (4) "
                "and groups (32))",
            )
        alter(broker, res.resource_name, set_configs, deletes, replace=replace, validate_only=validate_only)
    except ResourceError as exc:
        result["error_code"], result["error_message"] = exc.code, str(exc)
    except StorageError as exc:
        result["error_code"] = error_code(exc)
        result["error_message"] = str(exc)
    return result


@serves(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, access=_configs_rule(Operation.ALTER_CONFIGS))
async def handle_incremental_alter_configs(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    responses = []
    for res in body.resources:
        try:
            _check_access(broker, request, res.resource_type, res.resource_name, Operation.ALTER_CONFIGS)
            current = (
                _current(broker, res.resource_type, res.resource_name)
                if res.resource_type in (TOPIC, BROKER, GROUP)
                else {}
            )
            set_configs, deletes = _changes(current, res.configs)
        except ResourceError as exc:
            responses.append(
                {
                    "resource_type": res.resource_type,
                    "resource_name": res.resource_name,
                    "error_code": exc.code,
                    "error_message": str(exc),
                }
            )
            continue
        except StorageError as exc:
            responses.append(
                {
                    "resource_type": res.resource_type,
                    "resource_name": res.resource_name,
                    "error_code": error_code(exc),
                    "error_message": str(exc),
                }
            )
            continue
        responses.append(
            _alter(
                broker, request, res, set_configs, deletes, replace=False, validate_only=body.validate_only
            )
        )
    return {"responses": responses}


@serves(ApiKey.ALTER_CONFIGS, 0, 2, access=_configs_rule(Operation.ALTER_CONFIGS))
async def handle_alter_configs(broker: BrokerContext, request: Request) -> Reply:
    """AlterConfigs (33): each resource's dynamic configs become exactly the given set."""
    body = request.body
    responses = []
    for res in body.resources:
        set_configs = {c.name: c.value or "" for c in res.configs}
        responses.append(
            _alter(broker, request, res, set_configs, [], replace=True, validate_only=body.validate_only)
        )
    return {"responses": responses}
