"""Issue 13, findings 1 and 2 through the real broker and CLI: a producer writing to a
topic name with a final newline gets INVALID_TOPIC_EXCEPTION and nothing breaks; a data
directory left with such a topic by an older version is served, listed and cleaned; a
folder that is not a logtrove data directory is refused by every writer."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker import clients
from tests.storage.data_dirs import old_version_data_dir, user_files

from logtrove.testing import BrokerProcess, cli_in, free_port


def produce_errors(bootstrap: str, topic: str) -> list[KafkaError]:
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000})
    errors: list[KafkaError] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    return errors


def test_producer_to_a_name_with_a_newline_gets_invalid_topic_and_the_broker_stays_whole(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(tmp_path / "data", free_port())
    broker.start()
    try:
        [error] = produce_errors(broker.bootstrap, "orders\n")
        assert error is not None and error.code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION
        assert produce_errors(broker.bootstrap, "orders") == [None]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("other", 1, 1)])["other"].result(30)
        broker.stop()
        broker.start()
        clients.produce_confluent(broker.bootstrap, "other", [(None, b"o1", [])])
        assert [v for _, v, _ in clients.consume_confluent(broker.bootstrap, "orders", 1)] == [b"v"]
        assert [v for _, v, _ in clients.consume_confluent(broker.bootstrap, "other", 1)] == [b"o1"]
    finally:
        broker.stop()
    listed = cli_in(tmp_path, "topics", "list", "--data", str(broker.data), "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(t["name"] for t in json.loads(listed.stdout)) == ["orders", "other"]
    assert not (broker.data / "topics" / "orders\n.json").exists()


def test_data_dir_with_an_illegal_topic_is_served_listed_and_cleaned(tmp_path: Path) -> None:
    data = tmp_path / "data"
    bad_id = old_version_data_dir(data)
    second = {"name": "billing\t", "topic_id": str(uuid.uuid4()), "partitions": 1, "configs": {}}
    (data / "topics" / "billing\t.json").write_text(json.dumps(second))
    shutil.copytree(data / "audit-0", data / "billing\t-0")
    broker = BrokerProcess(data, free_port())
    broker.start()
    try:
        while_serving = cli_in(tmp_path, "topics", "list", "--data", str(data))  # read-only, beside it
        assert while_serving.returncode == 0 and "invalid topic billing\\t" in while_serving.stderr
        remote = cli_in(tmp_path, "topics", "delete", second["topic_id"], "--bootstrap", broker.bootstrap)
        assert remote.returncode == 0, remote.stderr
        assert not (data / "billing\t-0").exists() and not (data / "topics" / "billing\t.json").exists()
        clients.produce_confluent(broker.bootstrap, "audit", [(None, b"a3", [])])
        got = clients.consume_confluent(broker.bootstrap, "audit", 3)
        assert [v for _, v, _ in got] == [b"a1", b"a2", b"a3"]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("fresh", 1, 1)])["fresh"].result(30)
    finally:
        broker.stop()
    log = broker.log.read_text()
    assert "orders\\n" in log and f"logtrove topics delete {bad_id}" in log
    assert "Traceback" not in log

    listed = cli_in(tmp_path, "topics", "list", "--data", str(data))
    assert listed.returncode == 0, listed.stderr
    assert "audit" in listed.stdout and "fresh" in listed.stdout
    assert "invalid topic orders\\n" in listed.stderr and str(bad_id) in listed.stderr
    as_json = json.loads(cli_in(tmp_path, "topics", "list", "--data", str(data), "--json").stdout)
    assert [(t["name"], t.get("topic_id")) for t in as_json if "invalid" in t] == [("orders\\n", str(bad_id))]

    deleted = cli_in(tmp_path, "topics", "delete", "orders\\n", "--data", str(data))
    assert deleted.returncode == 0, deleted.stderr
    assert not (data / "orders\n-0").exists() and not (data / "topics" / "orders\n.json").exists()
    listed = cli_in(tmp_path, "topics", "list", "--data", str(data))
    assert listed.returncode == 0 and "invalid" not in listed.stderr
    assert (data / "audit-0").is_dir()


def test_writers_refuse_a_folder_that_is_not_a_data_directory(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    files = user_files(folder)
    port = free_port()
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"value": "v"}\n')
    attempts = [
        ("serve", "--data", str(folder), "--listen", f"127.0.0.1:{port}", "--no-http"),
        ("topics", "create", "photos", "--data", str(folder)),
        ("produce", "photos", "--data", str(folder), "--file", str(lines)),
    ]
    for args in attempts:
        result = cli_in(tmp_path, *args, timeout=60)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        message = result.stderr.strip()
        assert len(message.splitlines()) == 1, message
        assert str(folder) in message and "--data" in message and "meta.json" in message
    assert sorted(p.name for p in folder.iterdir()) == ["2024-01", "photos-2023"]
    assert {name: (folder / name).read_bytes() for name in files} == files
