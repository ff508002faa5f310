"""The consumer group protocol (KIP-848) in raw kio requests, where clients hide the detail.

Epoch checks and hostile heartbeats (unknown member, wrong epoch, oversized lists, bad
regex), the revocation handshake between two members step by step, static members,
Metadata by topic ID, the offset APIs' member-epoch checks, the other group APIs on a
consumer-protocol group, the group across a broker restart, and answered leaves across a crash.
"""

from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from logtrove.testing import BrokerProcess, WireClient, free_port
from logtrove.wire import ZERO_UUID, ApiKey

HEARTBEAT, DESCRIBE = 68, 69
PARTITIONS = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with BrokerProcess(
        tmp_path_factory.mktemp("kip848") / "data", free_port(), "--default-partitions", str(PARTITIONS)
    ) as proc:
        yield proc


def topic_id(wire: WireClient, name: str) -> uuid.UUID:
    """The topic's ID (Metadata v12 auto-creates it with the default partition count)."""
    body = {
        "topics": [{"name": name, "topic_id": ZERO_UUID}],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    }
    found: uuid.UUID = wire.request(ApiKey.METADATA, 12, body).topics[0].topic_id
    return found


def heartbeat(
    wire: WireClient,
    group: str,
    member: str,
    epoch: int,
    *,
    topics: list[str] | None = None,
    owned: dict[uuid.UUID, list[int]] | None = None,
    rebalance_timeout: int = -1,
    **extra: Any,
) -> Any:
    body = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "rebalance_timeout": rebalance_timeout,
        "subscribed_topic_names": topics,
        "topic_partitions": None
        if owned is None
        else [{"topic_id": t, "partitions": ps} for t, ps in owned.items()],
        **extra,
    }
    return wire.request(HEARTBEAT, 1, body)


def join(wire: WireClient, group: str, member: str, topic: str, **extra: Any) -> Any:
    return heartbeat(wire, group, member, 0, topics=[topic], owned={}, rebalance_timeout=30_000, **extra)


def assigned(answer: Any) -> list[int]:
    assert answer.assignment is not None
    return sorted(p for tp in answer.assignment.topic_partitions for p in tp.partitions)


def test_metadata_finds_a_topic_by_id(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        tid = topic_id(wire, "by-id")
        body = {
            "topics": [{"name": None, "topic_id": tid}, {"name": None, "topic_id": uuid.uuid4()}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        found, missing = wire.request(ApiKey.METADATA, 12, body).topics
    assert (found.error_code, found.name, len(found.partitions)) == (ErrorCode.none, "by-id", PARTITIONS)
    assert missing.error_code == ErrorCode.unknown_topic_id


def test_join_gets_every_partition_and_wrong_epochs_are_fenced(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        tid = topic_id(wire, "fence")
        first = join(wire, "fence-g", "m1", "fence")
        assert first.error_code == ErrorCode.none and first.member_epoch >= 1
        assert assigned(first) == list(range(PARTITIONS))
        epoch = first.member_epoch
        ahead = heartbeat(wire, "fence-g", "m1", epoch + 5)
        assert ahead.error_code == ErrorCode.fenced_member_epoch
        unknown = heartbeat(wire, "fence-g", "nobody", epoch)
        assert unknown.error_code == ErrorCode.unknown_member_id
        steady = heartbeat(wire, "fence-g", "m1", epoch, owned={tid: list(range(PARTITIONS))})
        assert (steady.error_code, steady.member_epoch, steady.assignment) == (ErrorCode.none, epoch, None)
        absent = heartbeat(wire, "no-such-group", "m1", 3)
        assert absent.error_code == ErrorCode.group_id_not_found


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"group_id": ""}, ErrorCode.invalid_request),
        ({"member_id": ""}, ErrorCode.invalid_request),
        ({"rebalance_timeout": -1}, ErrorCode.invalid_request),
        ({"member_epoch": -3}, ErrorCode.invalid_request),
        ({"instance_id": " "}, ErrorCode.invalid_request),
        ({"rack_id": ""}, ErrorCode.invalid_request),
        ({"subscribed_topic_names": None}, ErrorCode.invalid_request),
        ({"subscribed_topic_names": [f"t{i}" for i in range(20_000)]}, ErrorCode.invalid_request),
        ({"topic_partitions": [{"topic_id": uuid.uuid4(), "partitions": [0]}]}, ErrorCode.invalid_request),
        ({"subscribed_topic_regex": "(unclosed"}, ErrorCode.invalid_regular_expression),
        ({"subscribed_topic_regex": "a" * 5000}, ErrorCode.invalid_regular_expression),
        ({"server_assignor": "sticky-of-my-own"}, ErrorCode.unsupported_assignor),
    ],
)
def test_hostile_joins_are_refused_and_create_nothing(
    broker: BrokerProcess, change: dict[str, Any], error: ErrorCode
) -> None:
    body = {
        "group_id": "hostile-g",
        "member_id": "h1",
        "member_epoch": 0,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": ["hostile"],
        "topic_partitions": [],
        **change,
    }
    with WireClient(broker.port) as wire:
        assert wire.request(HEARTBEAT, 1, body).error_code == error
        described = wire.request(
            DESCRIBE, 1, {"group_ids": ["hostile-g"], "include_authorized_operations": False}
        )
    assert described.groups[0].error_code == ErrorCode.group_id_not_found


def test_partitions_move_only_after_the_previous_owner_revoked_them(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        tid = topic_id(wire, "handover")
        a = join(wire, "handover-g", "a", "handover")
        all_parts = list(range(PARTITIONS))
        assert assigned(a) == all_parts
        b = join(wire, "handover-g", "b", "handover")
        assert b.error_code == ErrorCode.none and assigned(b) == []  # a still owns everything
        a2 = heartbeat(wire, "handover-g", "a", a.member_epoch, owned={tid: all_parts})
        keep = assigned(a2)
        assert len(keep) == PARTITIONS // 2 and a2.member_epoch == a.member_epoch  # revoke first
        b2 = heartbeat(wire, "handover-g", "b", b.member_epoch, owned={})
        assert b2.assignment is None or assigned(b2) == []  # not released yet
        a3 = heartbeat(wire, "handover-g", "a", a2.member_epoch, owned={tid: keep})
        assert a3.member_epoch > a.member_epoch and a3.error_code == ErrorCode.none
        b3 = heartbeat(wire, "handover-g", "b", b2.member_epoch, owned={})
        assert assigned(b3) == sorted(set(all_parts) - set(keep))


def test_static_member_comes_back_to_its_partitions(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        topic_id(wire, "static")
        first = join(wire, "static-g", "s1", "static", instance_id="box-1")
        taken = join(wire, "static-g", "s-other", "static", instance_id="box-1")
        assert taken.error_code == ErrorCode.unreleased_instance_id
        gone = heartbeat(wire, "static-g", "s1", -2, instance_id="box-1")
        assert (gone.error_code, gone.member_epoch) == (ErrorCode.none, -2)
        back = join(wire, "static-g", "s2", "static", instance_id="box-1")
        assert back.error_code == ErrorCode.none
        assert assigned(back) == assigned(first) and back.member_epoch == first.member_epoch
        described = wire.request(
            DESCRIBE, 1, {"group_ids": ["static-g"], "include_authorized_operations": False}
        )
    assert [m.member_id for m in described.groups[0].members] == ["s2"]


def commit(wire: WireClient, group: str, member: str, epoch: int, version: int = 9) -> ErrorCode:
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": epoch,
        "member_id": member,
        "group_instance_id": None,
        "topics": [{"name": "offs", "partitions": [{"partition_index": 0, "committed_offset": 7}]}],
    }
    code: ErrorCode = wire.request(ApiKey.OFFSET_COMMIT, version, body).topics[0].partitions[0].error_code
    return code


def fetch(wire: WireClient, group: str, member: str | None, epoch: int) -> Any:
    body = {
        "groups": [{"group_id": group, "member_id": member, "member_epoch": epoch, "topics": None}],
        "require_stable": False,
    }
    return wire.request(ApiKey.OFFSET_FETCH, 9, body).groups[0]


def test_offset_apis_check_the_member_epoch(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        topic_id(wire, "offs")
        epoch = join(wire, "offs-g", "o1", "offs").member_epoch
        assert commit(wire, "offs-g", "o1", epoch - 1) == ErrorCode.stale_member_epoch
        assert commit(wire, "offs-g", "ghost", epoch) == ErrorCode.unknown_member_id
        assert commit(wire, "offs-g", "", -1) == ErrorCode.unknown_member_id  # not while it has members
        assert commit(wire, "offs-g", "o1", epoch, version=8) == ErrorCode.unsupported_version
        assert commit(wire, "offs-g", "o1", epoch) == ErrorCode.none
        assert fetch(wire, "offs-g", "o1", epoch + 1).error_code == ErrorCode.stale_member_epoch
        assert fetch(wire, "offs-g", "ghost", epoch).error_code == ErrorCode.unknown_member_id
        for reader in (("o1", epoch), (None, -1)):  # the member, or an admin tool
            group = fetch(wire, "offs-g", *reader)
            assert group.error_code == ErrorCode.none
            assert group.topics[0].partitions[0].committed_offset == 7


def test_other_group_apis_on_a_consumer_protocol_group(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        topic_id(wire, "kinds")
        epoch = join(wire, "kinds-g", "k1", "kinds").member_epoch
        classic_join = {
            "group_id": "kinds-g",
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
            "reason": None,
        }
        assert (
            wire.request(ApiKey.JOIN_GROUP, 9, classic_join).error_code
            == ErrorCode.inconsistent_group_protocol
        )
        listed = wire.request(
            ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["CONSUMER"]}
        ).groups
        assert [(g.group_id, g.group_type) for g in listed if g.group_id == "kinds-g"] == [
            ("kinds-g", "consumer")
        ]
        assert all(g.group_type == "consumer" for g in listed)
        v5 = wire.request(
            ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["kinds-g"], "include_authorized_operations": False}
        ).groups[0]
        assert (v5.error_code, v5.group_state, v5.members) == (ErrorCode.none, "Dead", ())
        v6 = wire.request(
            ApiKey.DESCRIBE_GROUPS, 6, {"groups": ["kinds-g"], "include_authorized_operations": False}
        ).groups[0]
        assert (v6.error_code, v6.error_message) == (
            ErrorCode.group_id_not_found,
            "Group kinds-g is not a classic group.",
        )
        assert (
            wire.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["kinds-g"]}).results[0].error_code
            == ErrorCode.non_empty_group
        )
        offset_delete = {
            "group_id": "kinds-g",
            "topics": [{"name": "kinds", "partitions": [{"partition_index": 0}]}],
        }
        answer = wire.request(ApiKey.OFFSET_DELETE, 0, offset_delete)
        assert answer.topics[0].partitions[0].error_code == ErrorCode.group_subscribed_to_topic
        assert heartbeat(wire, "kinds-g", "k1", -1).member_epoch == -1
        assert (
            wire.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["kinds-g"]}).results[0].error_code
            == ErrorCode.none
        )
        described = wire.request(
            DESCRIBE, 1, {"group_ids": ["kinds-g"], "include_authorized_operations": False}
        )
        assert described.groups[0].error_code == ErrorCode.group_id_not_found
        assert epoch >= 1


def test_heartbeat_for_a_classic_group_with_members_is_group_id_not_found(broker: BrokerProcess) -> None:
    classic_join = {
        "group_id": "old-style",
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "group_instance_id": "fixed",  # static: joins at once, no MEMBER_ID_REQUIRED round
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
        "reason": None,
    }
    with WireClient(broker.port) as wire:
        topic_id(wire, "old-topic")
        assert wire.request(ApiKey.JOIN_GROUP, 9, classic_join).error_code == ErrorCode.none
        answer = join(wire, "old-style", "new-member", "old-topic")
    assert answer.error_code == ErrorCode.group_id_not_found


def test_the_group_survives_a_broker_restart(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", free_port(), "--default-partitions", "2") as proc:
        with WireClient(proc.port) as wire:
            tid = topic_id(wire, "durable")
            first = join(wire, "durable-g", "d1", "durable")
        proc.stop()
        proc.start()
        with WireClient(proc.port) as wire:
            again = heartbeat(wire, "durable-g", "d1", first.member_epoch, owned={tid: [0, 1]})
            described = wire.request(
                DESCRIBE, 1, {"group_ids": ["durable-g"], "include_authorized_operations": False}
            )
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, first.member_epoch)
    group = described.groups[0]
    assert (group.group_state, group.group_epoch) == ("Stable", first.member_epoch)
    assert [sorted(tp.partitions) for m in group.members for tp in m.assignment.topic_partitions] == [[0, 1]]


def test_an_answered_leave_survives_a_crash(tmp_path: Path) -> None:
    """A leave is answered only once the state file holds it: the broker is SIGKILLed
    right after the answers (the old code answered at once and saved up to 0.25 s later,
    so the members came back after the restart, holding their partitions for a session;
    the quick answer also let librdkafka 2.11 lose its rejoin after a max.poll.interval.ms
    leave, test 0089)."""
    with BrokerProcess(tmp_path / "data", free_port(), "--default-partitions", "2") as proc:
        with WireClient(proc.port) as wire:
            topic_id(wire, "leaving")
            join(wire, "leave-g", "l1", "leaving")
            join(wire, "leave-g", "l2", "leaving", instance_id="box-2")
            gone = heartbeat(wire, "leave-g", "l1", -1)
            paused = heartbeat(wire, "leave-g", "l2", -2, instance_id="box-2")
            proc.stop(signal.SIGKILL)
        proc.start()
        with WireClient(proc.port) as wire:
            described = wire.request(
                DESCRIBE, 1, {"group_ids": ["leave-g"], "include_authorized_operations": False}
            )
    assert (gone.error_code, gone.member_epoch) == (ErrorCode.none, -1)
    assert (paused.error_code, paused.member_epoch) == (ErrorCode.none, -2)
    assert [(m.member_id, m.member_epoch) for m in described.groups[0].members] == [("l2", -2)]
