"""A broker over a data directory where one partition directory is a symbolic link to a
folder elsewhere: it starts, serves the other partitions, answers KAFKA_STORAGE_ERROR
for the linked one, and never truncates or deletes the files behind the link."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode
from tests.broker.raw_produce import produce_raw

from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.testing import BrokerProcess, WireClient, free_port
from logtrove.wire import ApiKey


def test_the_broker_serves_around_a_partition_linked_out_of_its_data_dir(tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    with Storage.open(data) as storage:
        storage.create_topic("linked", 1)
        storage.log("linked", 0).append(build_batch([NewRecord(b"kept")]))
        storage.create_topic("healthy", 1)
    (data / "linked-0").rename(elsewhere)
    (data / "linked-0").symlink_to(elsewhere, target_is_directory=True)
    (data / ".clean-shutdown").unlink(missing_ok=True)  # an unclean start recovers what it opens
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    with BrokerProcess(data, free_port()) as broker:
        with WireClient(broker.port) as wire:
            assert produce_raw(wire, "linked", build_batch([NewRecord(b"refused")]))[0] == (
                ErrorCode.kafka_storage_error
            )
            assert wire.list_offsets("linked", 0, -1).error_code == ErrorCode.kafka_storage_error
            fetch = {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 1,
                "topics": [
                    {
                        "topic": "linked",
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                    }
                ],
            }
            fetched = wire.request(ApiKey.FETCH, 4, fetch)
            assert fetched.responses[0].partitions[0].error_code == ErrorCode.kafka_storage_error
            assert produce_raw(wire, "healthy", build_batch([NewRecord(b"served")]))[0] == ErrorCode.none
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        deleted = admin.delete_topics(["linked"])["linked"]
        try:
            deleted.result(15)
        except KafkaException as exc:  # refused or done: either way nothing behind the link goes
            assert exc.args[0].code() != 0
        logged = broker.log.read_text()
        assert "symbolic link" in logged and "internal error" not in logged
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before
    with Storage.open(data, read_only=True) as reader:
        assert [r.value for r in reader.log("healthy", 0).records()] == [b"served"]
