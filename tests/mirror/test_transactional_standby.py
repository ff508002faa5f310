"""A standby of a transactional topic through real processes: a confluent-kafka
transactional producer commits and aborts on a logtrove leader across segment rolls,
``serve --follow`` copies the batches, and the standby's rolls leave the ``.txnindex`` and
snapshot files a writer's leave (storage/txnfollow.py): a read_committed consumer of the
standby sees exactly the committed records, and its files hold one entry per abort."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker.txn_clients import READ_COMMITTED, read_values, txn_producer
from tests.mirror.helpers import DEADLINE_S, offsets

from logtrove.client import KafkaProtocolError
from logtrove.storage import Storage
from logtrove.storage.txnindex import SNAPSHOT_SUFFIX, read_txn_index
from logtrove.testing import BrokerProcess, free_port, wait_until
from logtrove.txn.partition import scan


def test_a_standbys_rolls_write_its_transaction_files(leader: BrokerProcess, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    topic = NewTopic("txstandby", 1, 1, config={"segment.bytes": "4096"})
    admin.create_topics([topic])["txstandby"].result(DEADLINE_S)
    producer = txn_producer(leader.bootstrap, "txstandby-tx")
    committed: list[bytes] = []
    for n in range(24):
        producer.begin_transaction()
        values = [b"s%02d-%02d-" % (n, i) + b"x" * 200 for i in range(4)]
        for value in values:
            producer.produce("txstandby", value=value)
        producer.flush(10)
        if n % 3 == 1:
            producer.abort_transaction(10)
        else:
            producer.commit_transaction(10)
            committed.extend(values)
    data = tmp_path / "standby"
    with Storage.open(data) as storage:  # small segments on the standby too (configs are its own)
        storage.create_topic("txstandby", 1, {"segment.bytes": "4096"}, followed_from=leader.bootstrap)
    with BrokerProcess(
        data, free_port(), "--follow", leader.bootstrap, "--follow-topics", "txstandby"
    ) as standby:

        def caught_up() -> bool:
            try:
                return offsets(standby.bootstrap, "txstandby", 0) == offsets(leader.bootstrap, "txstandby", 0)
            except KafkaProtocolError:  # not created on the standby yet
                return False

        wait_until(caught_up, DEADLINE_S, what="the standby to catch up")
        assert read_values(standby.bootstrap, "txstandby", READ_COMMITTED) == committed
    with Storage.open(data, read_only=True) as storage:
        log = storage.log("txstandby", 0)
        segments = log.segments
        walked = scan(log).aborted  # a walk of every header
        assert len(segments) > 4 and len(walked) == 8  # one per aborted transaction
        for i, seg in enumerate(segments[:-1]):  # every sealed segment's file says the walk's
            upper = segments[i + 1].base_offset
            assert read_txn_index(seg) == [a for a in walked if seg.base_offset <= a.last_offset < upper], i
    snapshots = list((data / "txstandby-0").glob("*" + SNAPSHOT_SUFFIX))
    assert len(snapshots) >= len(segments) - 1
