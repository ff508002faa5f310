"""An attacker suite generated from the served API table: every API key, every version the
broker serves, sent by a principal with no ACLs and by one that may only DESCRIBE.

The broker runs with ``--authorizer``; its data directory holds a topic ``secret`` with
records, a consumer group ``g`` with a committed offset and a user ``admin`` with SCRAM
credentials. Each request names those resources. What must hold, for every request:

* the data directory is byte-for-byte what it was (no topic, config, ACL, credential,
  offset or record changed), whoever sent it;
* a request that would change something is refused with one of Kafka's authorization
  error codes, and so is every other request from the principal without ACLs, unless its
  API only lists (Metadata, ListGroups, ListTransactions ...), in which case the answer
  names none of the protected resources;
* the broker keeps serving.

:data:`SAMPLES` has one request per API key. The first test fails when the table serves
a key without a sample, so an API added later is attacked here before it can ship.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from logtrove.broker.apis import build_api_table
from logtrove.records import NewRecord
from logtrove.records.builder import build_batch
from logtrove.testing import BrokerProcess, WireClient, cli_in, free_port
from logtrove.wire import ApiKey

ANON = "User:ANONYMOUS"
PROTECTED = ("secret", "admin")
AUTH_ERRORS = {
    ErrorCode.topic_authorization_failed,
    ErrorCode.group_authorization_failed,
    ErrorCode.cluster_authorization_failed,
    ErrorCode.transactional_id_authorization_failed,
}
TOPIC = [{"name": "secret", "partitions": [{"partition_index": 0, "partition": 0}]}]


@dataclass(frozen=True)
class Sample:
    """One request body (fields of every version: each version takes those it has), whether
    it would change state, and whether its API answers a listing (filtered, not refused)."""

    body: dict[str, Any]
    mutates: bool
    listing: bool = False


def _records() -> bytes:
    return build_batch([NewRecord(b"stolen", b"k")], base_timestamp=0)


SAMPLES: dict[int, Sample] = {
    ApiKey.PRODUCE: Sample(
        {
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": "secret", "partition_data": [{"index": 0, "records": _records()}]}],
        },
        mutates=True,
    ),
    ApiKey.FETCH: Sample(
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "topics": [
                {
                    "topic": "secret",
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
        },
        mutates=False,
    ),
    ApiKey.LIST_OFFSETS: Sample(
        {
            "replica_id": -1,
            "topics": [{"name": "secret", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
        mutates=False,
    ),
    ApiKey.METADATA: Sample(
        {"topics": [{"name": "secret"}, {"name": "brand-new"}], "allow_auto_topic_creation": True},
        mutates=True,  # auto-creation
    ),
    ApiKey.OFFSET_COMMIT: Sample(
        {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": "secret", "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
        },
        mutates=True,
    ),
    ApiKey.OFFSET_FETCH: Sample(
        {
            "group_id": "g",
            "topics": [{"name": "secret", "partition_indexes": [0]}],
            "groups": [{"group_id": "g", "topics": [{"name": "secret", "partition_indexes": [0]}]}],
        },
        mutates=False,
    ),
    ApiKey.FIND_COORDINATOR: Sample({"key": "g", "key_type": 0, "coordinator_keys": ["g"]}, mutates=False),
    ApiKey.JOIN_GROUP: Sample(
        {
            "group_id": "g",
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        mutates=True,
    ),
    ApiKey.HEARTBEAT: Sample({"group_id": "g", "generation_id": 1, "member_id": "m"}, mutates=True),
    ApiKey.LEAVE_GROUP: Sample(
        {"group_id": "g", "member_id": "m", "members": [{"member_id": "m"}]}, mutates=True
    ),
    ApiKey.SYNC_GROUP: Sample(
        {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []}, mutates=True
    ),
    ApiKey.DESCRIBE_GROUPS: Sample({"groups": ["g"]}, mutates=False),
    ApiKey.LIST_GROUPS: Sample({}, mutates=False, listing=True),
    ApiKey.CREATE_TOPICS: Sample(
        {
            "topics": [{"name": "brand-new", "num_partitions": 1, "replication_factor": 1}],
            "timeout": 5000,
        },
        mutates=True,
    ),
    ApiKey.DELETE_TOPICS: Sample(
        {"topic_names": ["secret"], "topics": [{"name": "secret"}], "timeout": 5000}, mutates=True
    ),
    ApiKey.DELETE_RECORDS: Sample(
        {
            "topics": [{"name": "secret", "partitions": [{"partition_index": 0, "offset": 1}]}],
            "timeout": 5000,
        },
        mutates=True,
    ),
    ApiKey.INIT_PRODUCER_ID: Sample({"transactional_id": "t", "transaction_timeout": 60_000}, mutates=True),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Sample(
        {
            "replica_id": -1,
            "topics": [{"topic": "secret", "partitions": [{"partition": 0, "leader_epoch": 0}]}],
        },
        mutates=False,
    ),
    ApiKey.ADD_PARTITIONS_TO_TXN: Sample(
        {
            "v3_and_below_transactional_id": "t",
            "v3_and_below_producer_id": 0,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "secret", "partitions": [0]}],
            "transactions": [
                {
                    "transactional_id": "t",
                    "producer_id": 0,
                    "producer_epoch": 0,
                    "verify_only": True,
                    "topics": [{"name": "secret", "partitions": [0]}],
                }
            ],
        },
        mutates=True,
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: Sample(
        {"transactional_id": "t", "producer_id": 0, "producer_epoch": 0, "group_id": "g"}, mutates=True
    ),
    ApiKey.END_TXN: Sample(
        {"transactional_id": "t", "producer_id": 0, "producer_epoch": 0, "committed": True}, mutates=True
    ),
    ApiKey.TXN_OFFSET_COMMIT: Sample(
        {
            "transactional_id": "t",
            "group_id": "g",
            "producer_id": 0,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "topics": [{"name": "secret", "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
        },
        mutates=True,
    ),
    ApiKey.DESCRIBE_ACLS: Sample(
        {
            "resource_type_filter": 1,
            "pattern_type_filter": 1,
            "operation": 1,
            "permission_type": 1,
        },
        mutates=False,
    ),
    ApiKey.CREATE_ACLS: Sample(
        {
            "creations": [
                {
                    "resource_type": 4,
                    "resource_name": "kafka-cluster",
                    "resource_pattern_type": 3,
                    "principal": ANON,
                    "host": "*",
                    "operation": 2,
                    "permission_type": 3,
                }
            ]
        },
        mutates=True,
    ),
    ApiKey.DELETE_ACLS: Sample(
        {
            "filters": [
                {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1, "permission_type": 1}
            ]
        },
        mutates=True,
    ),
    ApiKey.DESCRIBE_CONFIGS: Sample(
        {
            "resources": [
                {"resource_type": 2, "resource_name": "secret"},
                {"resource_type": 4, "resource_name": "0"},
                {"resource_type": 32, "resource_name": "g"},
            ]
        },
        mutates=False,
    ),
    ApiKey.ALTER_CONFIGS: Sample(
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "secret",
                    "configs": [{"name": "retention.ms", "value": "1"}],
                },
                {
                    "resource_type": 4,
                    "resource_name": "0",
                    "configs": [{"name": "log.retention.ms", "value": "1"}],
                },
            ]
        },
        mutates=True,
    ),
    ApiKey.DESCRIBE_LOG_DIRS: Sample({"topics": None}, mutates=False),
    ApiKey.CREATE_PARTITIONS: Sample(
        {"topics": [{"name": "secret", "count": 3}], "timeout": 5000}, mutates=True
    ),
    ApiKey.DELETE_GROUPS: Sample({"groups_names": ["g"]}, mutates=True),
    ApiKey.ELECT_LEADERS: Sample(
        {"election_type": 0, "topic_partitions": [{"topic": "secret", "partitions": [0]}], "timeout": 5000},
        mutates=True,
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Sample(
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "secret",
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}],
                },
                {
                    "resource_type": 32,
                    "resource_name": "g",
                    "configs": [
                        {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}
                    ],
                },
            ]
        },
        mutates=True,
    ),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Sample(
        {
            "timeout": 5000,
            "topics": [{"name": "secret", "partitions": [{"partition_index": 0, "replicas": [0]}]}],
        },
        mutates=True,
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Sample({"timeout": 5000, "topics": None}, mutates=False),
    ApiKey.OFFSET_DELETE: Sample(
        {"group_id": "g", "topics": [{"name": "secret", "partitions": [{"partition_index": 0}]}]},
        mutates=True,
    ),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Sample({"users": [{"name": "admin"}]}, mutates=False),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Sample(
        {
            "deletions": [],
            "upsertions": [
                {
                    "name": "admin",
                    "mechanism": 1,
                    "iterations": 4096,
                    "salt": b"attacker-salt",
                    "salted_password": bytes(32),
                }
            ],
        },
        mutates=True,
    ),
    ApiKey.DESCRIBE_CLUSTER: Sample({"include_cluster_authorized_operations": True}, mutates=False),
    ApiKey.DESCRIBE_PRODUCERS: Sample(
        {"topics": [{"name": "secret", "partition_indexes": [0]}]}, mutates=False
    ),
    ApiKey.DESCRIBE_TRANSACTIONS: Sample({"transactional_ids": ["t"]}, mutates=False),
    ApiKey.LIST_TRANSACTIONS: Sample(
        {"state_filters": [], "producer_id_filters": []}, mutates=False, listing=True
    ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Sample(
        {
            "group_id": "g",
            "member_id": "",
            "member_epoch": 0,
            "rebalance_timeout": 10_000,
            "subscribed_topic_names": ["secret"],
            "topic_partitions": [],
        },
        mutates=True,
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: Sample({"group_ids": ["g"]}, mutates=False),
}
PRE_AUTH = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
# versions whose response has no error code to refuse with: Kafka answers them empty
SILENT = {(ApiKey.DESCRIBE_LOG_DIRS, 1), (ApiKey.DESCRIBE_LOG_DIRS, 2)}


def _cli(tmp: Path, *args: str, stdin: str | None = None) -> None:
    done = cli_in(tmp, *args, input_=stdin)
    assert done.returncode == 0, done.stderr


def _tree(data: Path) -> dict[str, str]:
    """Every file of the data directory with its content's digest, except the broker's
    lock and the derived files it rewrites on its own (indexes, checkpoints)."""
    skip_suffixes = (".lock", ".keyidx", ".tagidx", ".skip", ".checkpoint", ".tmp")
    return {
        str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(data.rglob("*"))
        if p.is_file() and not p.name.endswith(skip_suffixes) and "checkpoint" not in p.name
    }


@dataclass
class Target:
    broker: BrokerProcess
    data: Path
    principal: str  # "none": no ACLs; "describe": DESCRIBE on everything
    topic_id: uuid.UUID  # of ``secret``: the newer Fetch and DeleteTopics name topics by ID

    def body(self, key: int) -> dict[str, Any]:
        """The sample of ``key``, naming ``secret`` by its ID too where the API can."""
        body = copy.deepcopy(SAMPLES[key].body)
        for topic in body.get("topics") or ():
            if isinstance(topic, dict) and topic.get("name", topic.get("topic")) == "secret":
                topic["topic_id"] = self.topic_id
        return body


@pytest.fixture(scope="module", params=["none", "describe"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp(f"attacker-{request.param}")
    data = tmp / "data"
    _cli(tmp, "topics", "create", "secret", "--partitions", "1", "--data", str(data))
    _cli(tmp, "produce", "secret", "--data", str(data), stdin='{"value": "one"}\n{"value": "two"}\n')
    _cli(tmp, "users", "add", "admin", "--data", str(data), "--password-stdin", stdin="admin-pw\n")
    # the group's committed offset, written by the super user
    with (
        BrokerProcess(data, free_port(), "--authorizer", "--super-user", ANON) as setup,
        WireClient(setup.port) as c,
    ):
        commit = SAMPLES[ApiKey.OFFSET_COMMIT].body
        resp = c.request(ApiKey.OFFSET_COMMIT, 8, commit)
        assert resp.topics[0].partitions[0].error_code == 0
        topic_id = c.request(ApiKey.METADATA, 12, {"topics": [{"name": "secret"}]}).topics[0].topic_id
    if request.param == "describe":
        for resource in (("--topic", "*"), ("--group", "*"), ("--transactional-id", "*"), ("--cluster",)):
            _cli(tmp, "acls", "add", "--data", str(data), "-p", ANON, "-o", "DESCRIBE", *resource)
    with BrokerProcess(data, free_port(), "--authorizer", "--super-user", "User:admin") as proc:
        yield Target(proc, data, request.param, topic_id)


def _codes(value: Any) -> Iterator[int]:
    """Every ``error_code`` (and ``*_error_code``) in a decoded response, at any depth."""
    if isinstance(value, tuple | list):
        for item in value:
            yield from _codes(item)
        return
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is None:
        return
    for name in fields:
        item = getattr(value, name)
        if name == "error_code" or name.endswith("_error_code"):
            yield int(item)
        else:
            yield from _codes(item)


def _versions() -> list[tuple[int, int]]:
    return [
        (key, version)
        for key, api in build_api_table().items()
        if key not in PRE_AUTH
        for version in range(api.min_version, api.max_version + 1)
    ]


def test_every_served_api_has_an_attack_sample() -> None:
    served = set(build_api_table()) - PRE_AUTH
    assert served == set(SAMPLES), "give each new API a sample request here"


@pytest.mark.parametrize(("key", "version"), _versions(), ids=str)
def test_a_principal_without_the_acls_changes_nothing_and_is_refused(
    target: Target, key: int, version: int
) -> None:
    sample = SAMPLES[key]
    before = _tree(target.data)
    with WireClient(target.broker.port) as client:
        try:
            reply = client.request(key, version, target.body(key))
        except (TimeoutError, ConnectionError) as exc:  # pragma: no cover - a failure path
            pytest.fail(f"the broker dropped the connection: {exc}")
    after = _tree(target.data)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"the request changed the data directory: {changed}"
    codes = set(_codes(reply))
    if (key, version) in SILENT and target.principal == "none":
        assert not codes and not any(name in repr(reply) for name in PROTECTED), reply
    elif sample.mutates or (target.principal == "none" and not sample.listing):
        assert codes & AUTH_ERRORS, f"no authorization error in {reply!r}"
    if sample.listing and target.principal == "none":
        assert not any(name in repr(reply) for name in PROTECTED), reply
    with WireClient(target.broker.port) as client:  # still serving
        assert client.list_offsets("secret", 0, -1) is not None
