"""GROUP config resources (KIP-848, Kafka 4.0): librdkafka's 0081 sets
``consumer.session.timeout.ms`` on a group and expects success; it used to be refused as
an unknown resource type. Admin client on a real broker, the value reaching the members
(the heartbeat interval a member is told), a restart, and a damaged file."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kio.schema.errors import ErrorCode

from logtrove.groups.group_configs import GROUP_CONFIGS_FILE, GroupConfigs
from logtrove.storage.errors import InvalidConfigError
from logtrove.testing import BrokerProcess, WireClient, free_port
from logtrove.wire import ApiKey

GROUP_CONFIG_SOURCE = 8
STATIC_SOURCE = 4


def _alter(admin: AdminClient, group: str, name: str, value: str | None) -> None:
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    res = ConfigResource(
        ResourceType.GROUP, group, incremental_configs=[ConfigEntry(name, value, incremental_operation=op)]
    )
    admin.incremental_alter_configs([res])[res].result(10)


def _describe(admin: AdminClient, group: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ResourceType.GROUP, group)
    return dict(admin.describe_configs([res])[res].result(10))


def _heartbeat_interval(broker: BrokerProcess, group: str) -> int:
    """Join ``group`` with a raw ConsumerGroupHeartbeat v0; the interval the member is told."""
    body = {
        "group_id": group,
        "member_id": "",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": ["t"],
        "server_assignor": None,
        "topic_partitions": [],
    }
    with WireClient(broker.port) as client:
        resp = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)
    assert resp.error_code == ErrorCode.none, resp
    return int(resp.heartbeat_interval.total_seconds() * 1000)


def test_a_group_config_is_described_set_used_and_kept(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", free_port()) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = _describe(admin, "not-yet")  # a group that does not exist has the broker's
        assert configs["consumer.session.timeout.ms"].value == "45000"
        assert configs["consumer.heartbeat.interval.ms"].source == STATIC_SOURCE
        _alter(admin, "billing", "consumer.session.timeout.ms", "50000")
        _alter(admin, "billing", "consumer.heartbeat.interval.ms", "7000")
        configs = _describe(admin, "billing")
        assert configs["consumer.session.timeout.ms"].value == "50000"
        assert configs["consumer.session.timeout.ms"].source == GROUP_CONFIG_SOURCE
        assert _heartbeat_interval(broker, "billing") == 7000
        assert _heartbeat_interval(broker, "other") == 5000
        for name, value, why in (
            ("consumer.session.timeout.ms", "1000", "outside"),
            ("share.record.lock.duration.ms", "1", "unknown group config"),
        ):
            with pytest.raises(Exception, match=why):
                _alter(admin, "billing", name, value)
        broker.stop()
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert _describe(admin, "billing")["consumer.heartbeat.interval.ms"].value == "7000"
        _alter(admin, "billing", "consumer.heartbeat.interval.ms", None)
        assert _describe(admin, "billing")["consumer.heartbeat.interval.ms"].value == "5000"


def test_a_damaged_group_config_file_is_kept_and_refuses_changes(tmp_path: Path) -> None:
    (tmp_path / GROUP_CONFIGS_FILE).write_text("[not, json")
    configs = GroupConfigs(
        tmp_path, lambda: {"consumer.session.timeout.ms": 45000, "consumer.heartbeat.interval.ms": 5000}
    )
    assert configs.value("g", "consumer.session.timeout.ms") == 45000
    with pytest.raises(InvalidConfigError, match="fixed or removed"):
        configs.alter("g", {"consumer.session.timeout.ms": "50000"}, [])
    assert (tmp_path / GROUP_CONFIGS_FILE).read_text() == "[not, json"


def test_the_heartbeat_interval_stays_below_the_session_timeout(tmp_path: Path) -> None:
    # a broker started with a short session (tests do): a group's own interval must fit it
    configs = GroupConfigs(
        tmp_path, lambda: {"consumer.session.timeout.ms": 3000, "consumer.heartbeat.interval.ms": 300}
    )
    with pytest.raises(InvalidConfigError, match="must be below"):
        configs.alter("g", {"consumer.heartbeat.interval.ms": "5000"}, [])
    configs.alter("g", {"consumer.heartbeat.interval.ms": "5000", "consumer.session.timeout.ms": "45000"}, [])
    assert configs.effective("g") == {
        "consumer.session.timeout.ms": 45000,
        "consumer.heartbeat.interval.ms": 5000,
    }
