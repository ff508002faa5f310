"""Apache Kafka's own command-line tools (4.4.0, run from their jars as ``kafka-*.sh``
runs them) against logtrove, each checked by what it answers: ``kafka-topics``,
``kafka-consumer-groups`` (describe and ``--reset-offsets``), ``kafka-configs`` (topic,
cluster default, group), ``kafka-acls``, ``kafka-get-offsets``, ``kafka-console-producer`` and
``-consumer``, ``kafka-verifiable-producer`` and ``-consumer``, ``kafka-delete-records``, ``kafka-log-dirs``, ``kafka-transactions``, and
``kafka-dump-log`` reading a logtrove partition's ``.log``, ``.index`` and ``.timeindex``
files."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from logtrove.testing import BrokerProcess, free_port
from logtrove.testing.kafka import KafkaJars

TOOLS = "org.apache.kafka.tools."
T0 = (int(time.time()) - 3600) * 1000  # an hour ago: retention (7 days) keeps the records


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A logtrove broker of its own: the tools change cluster-wide configs."""
    with BrokerProcess(tmp_path_factory.mktemp("tools") / "data", free_port()) as proc:
        yield proc


def tool(jars: KafkaJars, broker: BrokerProcess, main: str, *args: str) -> str:
    """A Kafka tool's standard output; it must exit 0."""
    done = jars.run(TOOLS + main, "--bootstrap-server", broker.bootstrap, *args)
    assert done.returncode == 0, f"{main} {args}: {done.stderr[-3000:]}{done.stdout[-3000:]}"
    return done.stdout


def _produce(broker: BrokerProcess, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions, timestamp=T0 + 1000 * i)
    assert producer.flush(30) == 0


@pytest.mark.slow  # several JVM starts, seconds each
def test_kafka_topics(kafka_jars: KafkaJars, broker: BrokerProcess) -> None:
    created = tool(
        kafka_jars, broker, "TopicCommand", "--create", "--topic", "tools-topics", "--partitions", "3",
        "--config", "retention.ms=1234567",
    )  # fmt: skip
    assert "Created topic tools-topics." in created
    tool(kafka_jars, broker, "TopicCommand", "--alter", "--topic", "tools-topics", "--partitions", "5")
    described = tool(kafka_jars, broker, "TopicCommand", "--describe", "--topic", "tools-topics")
    assert re.search(r"PartitionCount: 5\s+ReplicationFactor: 1\s+Configs: retention.ms=1234567", described)
    rows = re.findall(r"Partition: (\d+)\s+Leader: (\d+)\s+Replicas: (\d+)\s+Isr: (\d+)", described)
    assert rows == [(str(p), "0", "0", "0") for p in range(5)]
    refused = kafka_jars.run(
        TOOLS + "TopicCommand", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "tools-topics"
    )
    assert refused.returncode != 0
    assert "already exists" in refused.stdout + refused.stderr
    tool(kafka_jars, broker, "TopicCommand", "--delete", "--topic", "tools-topics")
    listed = tool(kafka_jars, broker, "TopicCommand", "--list", "--exclude-internal")
    assert "tools-topics" not in listed.split()


def _group_offsets(admin: AdminClient, group: str) -> dict[int, int]:
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def _reset_rows(output: str) -> dict[int, int]:
    return {
        int(p): int(o) for p, o in re.findall(r"^tools-cg\s+tools-groups\s+(\d+)\s+(\d+)\s*$", output, re.M)
    }


@pytest.mark.slow  # several JVM starts, seconds each
def test_kafka_consumer_groups_describe_and_reset(kafka_jars: KafkaJars, broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("tools-groups", 3, 1)])["tools-groups"].result(30)
    _produce(broker, "tools-groups", 30, 3)  # partition p holds i = p, p+3, …: 10 records each
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "tools-cg"})
    commits = [TopicPartition("tools-groups", 0, 4), TopicPartition("tools-groups", 1, 7)]
    consumer.commit(offsets=[*commits, TopicPartition("tools-groups", 2, 10)], asynchronous=False)
    consumer.close()
    group = "consumer.group.ConsumerGroupCommand"

    described = tool(kafka_jars, broker, group, "--describe", "--group", "tools-cg")
    rows = re.findall(r"^tools-cg\s+tools-groups\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", described, re.M)
    assert sorted(rows) == [("0", "4", "10", "6"), ("1", "7", "10", "3"), ("2", "10", "10", "0")]
    state = tool(kafka_jars, broker, group, "--describe", "--group", "tools-cg", "--state")
    assert re.search(r"tools-cg\s+127\.0\.0\.1:\d+\s+\(0\)\s+-\s+Empty\s+0", state), state

    reset = ["--reset-offsets", "--group", "tools-cg", "--topic", "tools-groups", "--execute"]
    earliest = tool(kafka_jars, broker, group, *reset, "--to-earliest")
    assert _reset_rows(earliest) == {0: 0, 1: 0, 2: 0}
    assert _group_offsets(admin, "tools-cg") == {0: 0, 1: 0, 2: 0}

    # 20 s after T0: record 20 (partition 2, offset 6) and the next of each partition
    when = datetime.fromtimestamp((T0 + 20_000) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    by_time = tool(kafka_jars, broker, group, *reset, "--to-datetime", when)
    assert _reset_rows(by_time) == {0: 7, 1: 7, 2: 6}
    assert _group_offsets(admin, "tools-cg") == {0: 7, 1: 7, 2: 6}

    shifted = tool(kafka_jars, broker, group, *reset, "--shift-by", "-2")
    assert _reset_rows(shifted) == {0: 5, 1: 5, 2: 4}
    assert _group_offsets(admin, "tools-cg") == {0: 5, 1: 5, 2: 4}

    past_end = tool(kafka_jars, broker, group, *reset, "--shift-by", "100")
    assert _reset_rows(past_end) == {0: 10, 1: 10, 2: 10}  # clamped to the log end

    one = ["--reset-offsets", "--group", "tools-cg", "--topic", "tools-groups:1", "--execute"]
    assert _reset_rows(tool(kafka_jars, broker, group, *one, "--to-offset", "3")) == {1: 3}
    # every record is older than 2 minutes and younger than 2 hours
    assert _reset_rows(tool(kafka_jars, broker, group, *reset, "--by-duration", "PT2M")) == {
        0: 10,
        1: 10,
        2: 10,
    }
    assert _reset_rows(tool(kafka_jars, broker, group, *reset, "--by-duration", "PT2H")) == {0: 0, 1: 0, 2: 0}
    assert _group_offsets(admin, "tools-cg") == {0: 0, 1: 0, 2: 0}

    dropped = tool(
        kafka_jars, broker, group, "--delete-offsets", "--group", "tools-cg", "--topic", "tools-groups:2"
    )
    assert re.search(r"tools-groups\s+2\s+Successful", dropped), dropped
    assert _group_offsets(admin, "tools-cg") == {0: 0, 1: 0}

    deleted = tool(kafka_jars, broker, group, "--delete", "--group", "tools-cg")
    assert "Deletion of requested consumer groups ('tools-cg') was successful." in deleted
    assert "tools-cg" not in tool(kafka_jars, broker, group, "--list").split()


def _described(admin: AdminClient, resource: ConfigResource) -> dict[str, tuple[str, int]]:
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: (e.value, e.source) for name, e in entries.items()}


@pytest.mark.slow  # several JVM starts, seconds each
def test_kafka_configs(kafka_jars: KafkaJars, broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("tools-configs", 1, 1)])["tools-configs"].result(30)
    configs = "ConfigCommand"
    topic = ["--entity-type", "topics", "--entity-name", "tools-configs"]
    tool(
        kafka_jars,
        broker,
        configs,
        *topic,
        "--alter",
        "--add-config",
        "retention.ms=2000000,cleanup.policy=[compact,delete]",
    )
    tool(kafka_jars, broker, configs, *topic, "--alter", "--delete-config", "retention.ms")
    described = tool(kafka_jars, broker, configs, *topic, "--describe")
    assert "cleanup.policy=compact,delete sensitive=false" in described
    assert "retention.ms" not in described
    resource = ConfigResource(ResourceType.TOPIC, "tools-configs")
    assert _described(admin, resource)["cleanup.policy"] == ("compact,delete", 1)  # DYNAMIC_TOPIC_CONFIG

    default = ["--entity-type", "brokers", "--entity-default"]
    tool(kafka_jars, broker, configs, *default, "--alter", "--add-config", "log.retention.ms=5000000")
    assert "log.retention.ms=5000000" in tool(kafka_jars, broker, configs, *default, "--describe")
    every = tool(kafka_jars, broker, configs, *topic, "--describe", "--all")
    assert re.search(r"^\s*retention.ms=5000000 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000000, DEFAULT_CONFIG:log.retention.ms=604800000\}", every, re.M)  # fmt: skip
    assert _described(admin, resource)["retention.ms"] == ("5000000", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
    tool(kafka_jars, broker, configs, *default, "--alter", "--delete-config", "log.retention.ms")
    assert _described(admin, resource)["retention.ms"] == ("604800000", 5)

    group = ["--entity-type", "groups", "--entity-name", "tools-config-group"]
    tool(kafka_jars, broker, configs, *group, "--alter", "--add-config", "consumer.session.timeout.ms=50000")
    assert "consumer.session.timeout.ms=50000" in tool(kafka_jars, broker, configs, *group, "--describe")
    bad = kafka_jars.run(
        TOOLS + configs,
        "--bootstrap-server",
        broker.bootstrap,
        *topic,
        "--alter",
        "--add-config",
        "retention.ms=soon",
    )
    assert bad.returncode != 0
    assert _described(admin, resource)["retention.ms"] == ("604800000", 5)


def _offsets(output: str) -> dict[int, int]:
    return {int(p): int(o) for p, o in re.findall(r"^tools-offsets:(\d+):(-?\d+)$", output, re.M)}


def test_kafka_get_offsets(kafka_jars: KafkaJars, broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("tools-offsets", 2, 1)])["tools-offsets"].result(30)
    _produce(broker, "tools-offsets", 20, 2)  # partition p: i = p, p+2, …
    admin.delete_records([TopicPartition("tools-offsets", 1, 3)])[
        TopicPartition("tools-offsets", 1, 3)
    ].result(30)
    shell = ["GetOffsetShell", "--topic", "tools-offsets", "--time"]
    assert _offsets(tool(kafka_jars, broker, *shell, "latest")) == {0: 10, 1: 10}
    assert _offsets(tool(kafka_jars, broker, *shell, "earliest")) == {0: 0, 1: 3}
    assert _offsets(tool(kafka_jars, broker, *shell, str(T0 + 7_000))) == {0: 4, 1: 3}
    assert _offsets(tool(kafka_jars, broker, *shell, "max-timestamp")) == {0: 9, 1: 9}
    # without tiered storage no partition has a latest-tiered offset: the tool lists none
    assert _offsets(tool(kafka_jars, broker, *shell, "latest-tiered")) == {}


def _batches(dump: str) -> list[tuple[int, int, int]]:
    """(base offset, last offset, position) of every batch in a .log dump."""
    found = re.findall(r"baseOffset: (\d+) lastOffset: (\d+) .*? position: (\d+) .*? isvalid: true", dump)
    return [(int(b), int(last), int(p)) for b, last, p in found]


def test_kafka_dump_log_reads_logtrove_segments(kafka_jars: KafkaJars, tmp_path: Path) -> None:
    """DumpLogSegments decodes every batch of a logtrove segment (checksums valid, records
    as written) and reads its offset and time indexes. Entries point at batch starts; an
    entry names the batch's first offset where Kafka names its last (the difference
    ``docs/KAFKA_APIS.md`` lists), so the tool reports exactly those multi-record batches
    and nothing else."""
    with BrokerProcess(tmp_path / "data", free_port()) as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        admin.create_topics([NewTopic("dump", 1, 1)])["dump"].result(30)
        producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 50})
        for batch in range(24):
            size = 1 if batch % 2 == 0 else 4  # single-record and four-record batches
            for _ in range(size):
                producer.produce("dump", key=b"k", value=os.urandom(900), partition=0, headers=[("h", b"x")])
            assert producer.flush(30) == 0
    segment = tmp_path / "data" / "dump-0" / f"{0:020d}"
    log = kafka_jars.run(TOOLS + "DumpLogSegments", "--files", f"{segment}.log", "--deep-iteration")
    assert log.returncode == 0, log.stderr
    batches = _batches(log.stdout)
    assert [last - base + 1 for base, last, _ in batches] == [1, 4] * 12
    assert (
        len(
            re.findall(
                r"\| offset: \d+ CreateTime: \d+ keySize: 1 valueSize: 900 .*headerKeys: \[h\]", log.stdout
            )
        )
        == 60
    )
    by_position = {position: (base, last) for base, last, position in batches}

    indexes = kafka_jars.run(TOOLS + "DumpLogSegments", "--files", f"{segment}.index,{segment}.timeindex")
    assert indexes.returncode == 0, indexes.stderr
    answer = indexes.stdout + indexes.stderr  # the checks' findings go to either
    entries = [
        (int(o), int(p)) for o, p in re.findall(r"^offset: (\d+) position: (\d+)$", indexes.stdout, re.M)
    ]
    assert len(entries) >= 3
    for offset, position in entries:
        assert by_position[position][0] == offset  # the batch starting there begins at the entry's offset
    expected_mismatches = {(o, by_position[p][1]) for o, p in entries if by_position[p][1] != o}
    reported = {(int(a), int(b)) for a, b in re.findall(r"Index offset: (\d+), log offset: (\d+)", answer)}
    assert reported == expected_mismatches
    time_entries = [
        (int(t), int(o)) for t, o in re.findall(r"^timestamp: (\d+) offset: (\d+)$", indexes.stdout, re.M)
    ]
    assert len(time_entries) >= 3
    by_base = {base: last for base, last, _ in batches}
    assert all(o in by_base for _, o in time_entries)  # each names the first offset of a batch
    timestamps = [t for t, _ in time_entries]
    assert timestamps == sorted(set(timestamps))
    not_found = re.findall(r"Indexed offset: (\d+), found log offset: (\d+)", answer)
    assert {(int(a), int(b)) for a, b in not_found} == {
        (o, by_base[o]) for _, o in time_entries if by_base[o] != o
    }
    assert "out of order" not in answer.lower()
    assert "timestamp mismatch" not in answer.lower()


def test_console_tools_delete_records_and_log_dirs(kafka_jars: KafkaJars, broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("tools-records", 1, 1)])["tools-records"].result(30)
    produced = kafka_jars.run(
        TOOLS + "ConsoleProducer", "--bootstrap-server", broker.bootstrap, "--topic", "tools-records",
        "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
        input_="k0:a\nk1:b\nk2:c\nk3:d\n",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = tool(
        kafka_jars, broker, "consumer.ConsoleConsumer", "--topic", "tools-records", "--from-beginning",
        "--max-messages", "4", "--formatter-property", "print.offset=true", "--formatter-property", "print.key=true",
    )  # fmt: skip
    rows = re.findall(r"^Offset:(\d+)\s+(k\d)\s+([a-d])$", consumed, re.M)
    assert rows == [("0", "k0", "a"), ("1", "k1", "b"), ("2", "k2", "c"), ("3", "k3", "d")]

    spec = '{"version": 1, "partitions": [{"topic": "tools-records", "partition": 0, "offset": 2}]}'
    offsets = broker.data.parent / "delete-records.json"
    offsets.write_text(spec)
    deleted = tool(kafka_jars, broker, "DeleteRecordsCommand", "--offset-json-file", str(offsets))
    assert re.search(r"partition: tools-records-0\s+low_watermark: 2", deleted), deleted
    low = admin.list_offsets({TopicPartition("tools-records", 0): OffsetSpec.earliest()})
    assert low[TopicPartition("tools-records", 0)].result(30).offset == 2

    described = tool(kafka_jars, broker, "LogDirsCommand", "--describe", "--topic-list", "tools-records")
    answer = json.loads(described.splitlines()[-1])
    (only,) = answer["brokers"]
    (log_dir,) = only["logDirs"]
    assert (only["broker"], log_dir["error"], Path(log_dir["logDir"])) == (0, None, broker.data.resolve())
    (partition,) = log_dir["partitions"]
    on_disk = sum(f.stat().st_size for f in (broker.data / "tools-records-0").glob("*.log"))
    assert (partition["partition"], partition["size"], partition["isFuture"]) == (
        "tools-records-0",
        on_disk,
        False,
    )


def test_kafka_transactions(kafka_jars: KafkaJars, broker: BrokerProcess) -> None:
    """list, describe and describe-producers see an open and a committed transaction;
    abort, which sends WriteTxnMarkers to the partition's leader, is refused with Kafka's
    message (logtrove does not serve that broker-to-broker API: docs/KAFKA_APIS.md)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("tools-txn", 1, 1)])["tools-txn"].result(30)
    done = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tools-tx-done"})
    done.init_transactions()
    done.begin_transaction()
    done.produce("tools-txn", b"committed", partition=0)
    done.commit_transaction()
    pending = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tools-tx-open"})
    pending.init_transactions()
    pending.begin_transaction()
    pending.produce("tools-txn", b"open", partition=0)
    assert pending.flush(30) == 0
    try:
        txn = "TransactionsCommand"
        listed = re.findall(
            r"^(tools-tx-\w+)\s+0\s+(\d+)\s+(\w+)\s*$", tool(kafka_jars, broker, txn, "list"), re.M
        )
        states = {name: state for name, _, state in listed}
        assert states == {"tools-tx-done": "CompleteCommit", "tools-tx-open": "Ongoing"}
        open_pid = next(pid for name, pid, _ in listed if name == "tools-tx-open")

        described = tool(kafka_jars, broker, txn, "describe", "--transactional-id", "tools-tx-open")
        row = described.splitlines()[-1].split()
        assert row[:5] == ["0", "tools-tx-open", open_pid, "0", "Ongoing"]
        assert row[-1] == "tools-txn-0"

        producers = tool(
            kafka_jars, broker, txn, "describe-producers", "--topic", "tools-txn", "--partition", "0"
        )
        rows = {r.split()[0]: r.split() for r in producers.splitlines()[1:] if r.strip()}
        assert rows[open_pid][-1] == "2"  # after the committed record (0) and its marker (1)

        abort = ["abort", "--topic", "tools-txn", "--partition", "0", "--start-offset", "2"]
        refused = kafka_jars.run(TOOLS + txn, "--bootstrap-server", broker.bootstrap, *abort)
        assert refused.returncode != 0
        assert "does not support WRITE_TXN_MARKERS" in refused.stdout + refused.stderr
    finally:
        pending.abort_transaction()


def _acls(admin: AdminClient) -> set[tuple[str, str, str, str, str]]:
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    bindings = admin.describe_acls(everything).result(30)
    return {
        (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.operation.name)
        for b in bindings
    }


def test_kafka_acls(kafka_jars: KafkaJars, tmp_path: Path) -> None:
    """kafka-acls adds, lists and removes ACLs on a logtrove broker with its authorizer on
    (the tool's own principal, ANONYMOUS, is a super user)."""
    extra = ("--authorizer", "--super-user", "User:ANONYMOUS")
    with BrokerProcess(tmp_path / "data", free_port(), *extra) as secured:
        admin = AdminClient({"bootstrap.servers": secured.bootstrap})
        acl = "AclCommand"
        alice = ["--allow-principal", "User:alice"]
        tool(
            kafka_jars,
            secured,
            acl,
            "--add",
            *alice,
            "--operation",
            "Read",
            "--operation",
            "Describe",
            "--topic",
            "acl-t",
        )
        tool(kafka_jars, secured, acl, "--add", *alice, "--consumer", "--topic", "acl-in", "--group", "acl-",
             "--resource-pattern-type", "prefixed")  # fmt: skip
        assert _acls(admin) == {
            ("TOPIC", "acl-t", "LITERAL", "User:alice", "READ"),
            ("TOPIC", "acl-t", "LITERAL", "User:alice", "DESCRIBE"),
            ("TOPIC", "acl-in", "PREFIXED", "User:alice", "READ"),
            ("TOPIC", "acl-in", "PREFIXED", "User:alice", "DESCRIBE"),
            ("GROUP", "acl-", "PREFIXED", "User:alice", "READ"),
        }
        listed = tool(kafka_jars, secured, acl, "--list", "--principal", "User:alice")
        assert "ResourcePattern(resourceType=GROUP, name=acl-, patternType=PREFIXED)" in listed
        assert listed.count("(principal=User:alice, host=*, operation=") == 5
        tool(
            kafka_jars, secured, acl, "--remove", *alice, "--operation", "Read", "--topic", "acl-t", "--force"
        )
        assert ("TOPIC", "acl-t", "LITERAL", "User:alice", "READ") not in _acls(admin)
        assert len(_acls(admin)) == 4


def _events(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_kafka_verifiable_producer_and_consumer(kafka_jars: KafkaJars, broker: BrokerProcess) -> None:
    """The system tests' producer and consumer: every send acknowledged at contiguous
    offsets per partition, every record consumed once by a group, and its commits."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("tools-verifiable", 2, 1)])["tools-verifiable"].result(30)
    topic = ["--topic", "tools-verifiable"]
    produced = _events(
        tool(kafka_jars, broker, "VerifiableProducer", *topic, "--max-messages", "100", "--acks", "-1")
    )
    sent = [e for e in produced if e["name"] == "producer_send_success"]
    assert len(sent) == 100
    per_partition: dict[int, list[int]] = {}
    for event in sent:
        per_partition.setdefault(int(str(event["partition"])), []).append(int(str(event["offset"])))
    assert all(sorted(offsets) == list(range(len(offsets))) for offsets in per_partition.values())
    (summary,) = [e for e in produced if e["name"] == "tool_data"]
    assert (summary["sent"], summary["acked"]) == (100, 100)

    consumed = _events(
        tool(kafka_jars, broker, "VerifiableConsumer", *topic, "--group-id", "tools-vc", "--max-messages", "100",
             "--reset-policy", "earliest")
    )  # fmt: skip
    records = [p for e in consumed if e["name"] == "records_consumed" for p in e["partitions"]]  # type: ignore[attr-defined]
    assert sum(p["count"] for p in records) == 100
    commits = [e for e in consumed if e["name"] == "offsets_committed"]
    assert commits
    assert all(e["success"] for e in commits)
    ends = {p: len(offsets) for p, offsets in per_partition.items()}
    assert _group_offsets(admin, "tools-vc") == ends
