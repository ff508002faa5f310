"""Broker configs (issue 14, finding 6): DescribeConfigs / IncrementalAlterConfigs on the
BROKER resource used to answer INVALID_REQUEST, and AlterConfigs (33) was not served —
librdkafka's 0081 alters a broker config next to topic configs and expects success.

Broker-level ``log.*`` configs are honoured as Kafka honours them: the default of every
topic that does not override them. A real admin client (confluent-kafka), raw requests where it
hides the detail (the cluster default, AlterConfigs), a restart, and hostile config files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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

from logtrove.storage import Storage
from logtrove.storage.broker_configs import BROKER_CONFIGS_FILE
from logtrove.storage.errors import InvalidConfigError
from logtrove.testing import BrokerProcess, WireClient, wait_until
from logtrove.wire import ApiKey


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _node(admin: AdminClient) -> str:
    return str(admin.describe_cluster().result(10).nodes[0].id)


def _set(admin: AdminClient, rtype: ResourceType, name: str, **values: str | None) -> ConfigResource:
    entries = [
        ConfigEntry(
            key.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET,
        )
        for key, value in values.items()
    ]
    return ConfigResource(rtype, name, incremental_configs=entries)


def _alter_default(broker: BrokerProcess, name: str, value: str | None) -> int:
    """IncrementalAlterConfigs on the cluster default (resource name ""), which
    confluent-kafka refuses to send; the error code."""
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    config = {"name": name, "config_operation": op.value, "value": value}
    resource = {"resource_type": ResourceType.BROKER.value, "resource_name": "", "configs": [config]}
    with WireClient(broker.port) as client:
        resp = client.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [resource], "validate_only": False}
        )
    (answer,) = resp.responses
    return int(answer.error_code)


def _alter(admin: AdminClient, *resources: ConfigResource) -> dict[str, BaseException | None]:
    futures = admin.incremental_alter_configs(list(resources))
    out: dict[str, BaseException | None] = {}
    for res, fut in futures.items():
        try:
            fut.result(10)
            out[res.name] = None
        except Exception as exc:
            out[res.name] = exc
    return out


def _describe(admin: AdminClient, rtype: ResourceType, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(rtype, name)
    return dict(admin.describe_configs([res])[res].result(10))


def test_broker_resource_is_described_with_static_and_default_configs(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    node = _node(admin)
    configs = _describe(admin, ResourceType.BROKER, node)
    assert configs["broker.id"].value == node
    assert configs["broker.id"].is_read_only
    assert configs["broker.id"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["log.retention.ms"].value == "604800000"
    assert configs["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["log.retention.ms"].is_read_only


def test_broker_level_retention_is_the_default_of_topics_without_their_own(
    shared_broker: BrokerProcess,
) -> None:
    admin = _admin(shared_broker)
    node = _node(admin)
    admin.create_topics(
        [NewTopic("bc-plain", 1, 1), NewTopic("bc-own", 1, 1, config={"retention.ms": "1000"})]
    )
    for name in ("bc-plain", "bc-own"):
        _wait_topic(admin, name)
    # librdkafka 0081's broker resource (a config logtrove keeps but has no use for) in the
    # same request as a topic-default one: both succeed
    answers = _alter(
        admin,
        _set(admin, ResourceType.BROKER, node, log_retention_ms="3600000"),
    )
    assert answers == {node: None}
    assert _alter(
        admin, _set(admin, ResourceType.BROKER, node, sasl_kerberos_min_time_before_relogin="58000")
    ) == {node: None}
    plain = _describe(admin, ResourceType.TOPIC, "bc-plain")
    assert plain["retention.ms"].value == "3600000"
    assert plain["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert _describe(admin, ResourceType.TOPIC, "bc-own")["retention.ms"].value == "1000"
    broker = _describe(admin, ResourceType.BROKER, node)
    assert broker["log.retention.ms"].value == "3600000"
    assert broker["sasl.kerberos.min.time.before.relogin"].value == "58000"

    # the cluster default is shadowed by the broker level, and shows once that goes
    assert _alter_default(shared_broker, "log.retention.ms", "7200000") == 0
    assert _describe(admin, ResourceType.TOPIC, "bc-plain")["retention.ms"].value == "3600000"
    assert _alter(admin, _set(admin, ResourceType.BROKER, node, log_retention_ms=None)) == {node: None}
    plain = _describe(admin, ResourceType.TOPIC, "bc-plain")
    assert plain["retention.ms"].value == "7200000"
    assert plain["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert _alter_default(shared_broker, "log.retention.ms", None) == 0
    assert _describe(admin, ResourceType.TOPIC, "bc-plain")["retention.ms"].value == "604800000"


def test_synonyms_list_every_level_highest_first(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    node = _node(admin)
    admin.create_topics([NewTopic("bc-syn", 1, 1, config={"segment.bytes": "2097152"})])
    _wait_topic(admin, "bc-syn")
    assert _alter(admin, _set(admin, ResourceType.BROKER, node, log_segment_bytes="4194304")) == {node: None}
    try:
        resource = {
            "resource_type": ResourceType.TOPIC.value,
            "resource_name": "bc-syn",
            "configuration_keys": ["segment.bytes"],
        }
        with WireClient(shared_broker.port) as client:
            resp = client.request(
                ApiKey.DESCRIBE_CONFIGS,
                4,
                {"resources": [resource], "include_synonyms": True, "include_documentation": False},
            )
        ((entry,),) = [r.configs for r in resp.results]
        chain = [(s.name, s.value, s.source) for s in entry.synonyms]
        assert entry.value == "2097152"
        assert chain == [
            ("segment.bytes", "2097152", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
            ("log.segment.bytes", "4194304", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
            ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG.value),
        ]
    finally:
        _alter(admin, _set(admin, ResourceType.BROKER, node, log_segment_bytes=None))


def test_bad_broker_resources_fail_alone(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    node = _node(admin)
    admin.create_topics([NewTopic("bc-mixed", 1, 1)])
    _wait_topic(admin, "bc-mixed")
    answers = _alter(
        admin,
        _set(admin, ResourceType.BROKER, node, broker_id="7"),
        _set(admin, ResourceType.TOPIC, "bc-mixed", flush_ms="12345678"),
    )
    assert "cannot update these configs dynamically: broker.id" in str(answers[node])
    assert answers["bc-mixed"] is None
    assert _describe(admin, ResourceType.TOPIC, "bc-mixed")["flush.ms"].value == "12345678"

    # a client routes a broker resource to that broker; a raw request names another one
    config = {"name": "log.retention.ms", "config_operation": 0, "value": "1"}
    resource = {"resource_type": ResourceType.BROKER.value, "resource_name": "4242", "configs": [config]}
    with WireClient(shared_broker.port) as client:
        (answer,) = client.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [resource], "validate_only": False}
        ).responses
    assert answer.error_code == ErrorCode.invalid_request
    assert "unexpected broker id '4242'" in answer.error_message
    invalid = _alter(admin, _set(admin, ResourceType.BROKER, node, log_retention_ms="soon"))
    assert "INVALID_CONFIG" in str(invalid[node]) or "not an integer" in str(invalid[node])
    assert _describe(admin, ResourceType.BROKER, node)["log.retention.ms"].value == "604800000"


def test_legacy_alter_configs_replaces_the_whole_set(shared_broker: BrokerProcess) -> None:
    admin = _admin(shared_broker)
    admin.create_topics([NewTopic("bc-legacy", 1, 1, config={"retention.ms": "1000", "flush.ms": "5"})])
    _wait_topic(admin, "bc-legacy")
    change = {
        "resource_type": ResourceType.TOPIC.value,
        "resource_name": "bc-legacy",
        "configs": [{"name": "segment.ms", "value": "60000"}],
    }
    with WireClient(shared_broker.port) as client:
        (answer,) = client.request(
            ApiKey.ALTER_CONFIGS, 2, {"resources": [change], "validate_only": False}
        ).responses
    assert answer.error_code == 0
    configs = _describe(admin, ResourceType.TOPIC, "bc-legacy")
    assert configs["segment.ms"].value == "60000"
    assert configs["retention.ms"].value == "604800000"  # not in the new set: back to the default
    assert configs["flush.ms"].value == "1000"


def test_broker_configs_survive_a_restart(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    node = _node(admin)
    admin.create_topics([NewTopic("bc-restart", 1, 1)])
    _wait_topic(admin, "bc-restart")
    assert _alter_default(broker, "log.cleanup.policy", "compact") == 0
    broker.stop()
    broker.start()
    admin = _admin(broker)
    assert _describe(admin, ResourceType.TOPIC, "bc-restart")["cleanup.policy"].value == "compact"
    assert _describe(admin, ResourceType.BROKER, node)["log.cleanup.policy"].source == (
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    )


def test_storage_applies_broker_defaults_to_open_logs(tmp_path: Path) -> None:
    with Storage.open(tmp_path / "d") as storage:
        storage.create_topic("t", 1)
        storage.alter_broker_configs("broker", {"log.retention.bytes": "1048576"})
        assert storage.log("t", 0).config.retention_bytes == 1_048_576
        assert storage.topic("t").config.retention_bytes == 1_048_576
    with Storage.open(tmp_path / "d") as storage:
        assert storage.log("t", 0).config.retention_bytes == 1_048_576


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[1, 2]", json.dumps({"cluster": "x"}).encode(), b"\xff\xfe"],
)
def test_a_broken_broker_config_file_opens_with_defaults_and_is_not_overwritten(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "d"
    with Storage.open(data) as storage:
        storage.create_topic("t", 1)
    (data / BROKER_CONFIGS_FILE).write_bytes(content)
    with Storage.open(data) as storage:
        assert storage.topic("t").config.retention_ms == 604_800_000
        with pytest.raises(InvalidConfigError, match="fixed or removed"):
            storage.alter_broker_configs("cluster", {"log.retention.ms": "1"})
    assert (data / BROKER_CONFIGS_FILE).read_bytes() == content
    assert any("not loaded" in r.getMessage() for r in caplog.records)


def test_a_bad_value_in_the_file_is_skipped_alone(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Storage.open(data) as storage:
        storage.create_topic("t", 1)
    bad = {"cluster": {"log.retention.ms": "soon", "log.segment.bytes": "2097152", "custom.x": "y"}}
    (data / BROKER_CONFIGS_FILE).write_text(json.dumps(bad))
    with Storage.open(data) as storage:
        config = storage.topic("t").config
        assert (config.retention_ms, config.segment_bytes) == (604_800_000, 2_097_152)
        assert storage.broker_configs().cluster == {"log.segment.bytes": "2097152", "custom.x": "y"}


def _wait_topic(admin: AdminClient, name: str) -> None:
    wait_until(lambda: name in admin.list_topics(timeout=10).topics, 10, what=f"topic {name} created")


def test_an_oversized_broker_config_file_is_not_read(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Storage.open(data) as storage:
        storage.create_topic("t", 1)
    with (data / BROKER_CONFIGS_FILE).open("wb") as f:
        f.truncate((64 << 20) + 1)  # sparse: nothing is written
    with Storage.open(data) as storage:
        assert storage.topic("t").config.retention_ms == 604_800_000
        with pytest.raises(InvalidConfigError, match="more than the"):
            storage.alter_broker_configs("cluster", {"log.retention.ms": "1"})
