"""A standby of a compacted topic (the seed's compaction-topic standby): copied from the
leader's log start like a consumer from offset 0, then compacted locally at the same
offsets; and a standby left behind catches up after the leader compacted past its end and
moved its log start beyond what the standby has."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.mirror.helpers import DEADLINE_S, mirror_once, offsets, raw_batches, served

from logtrove.records import iter_records
from logtrove.storage import Storage
from logtrove.testing import BrokerProcess, cli_in

COMPACTED = {"cleanup.policy": "compact,delete", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=COMPACTED)])[topic].result(DEADLINE_S)


def _produce(bootstrap: str, topic: str, writes: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1024})
    for key, value in writes:
        producer.produce(topic, key=key, value=value, partition=0)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0


def _latest(bootstrap: str, topic: str) -> dict[bytes | None, tuple[int, bytes | None]]:
    """key -> (offset, value) of its latest record, from the raw batches a broker serves."""
    start = offsets(bootstrap, topic, 0)[0]
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for batch in raw_batches(bootstrap, topic, 0):
        for record in iter_records(batch):
            if record.offset >= start:
                out[record.key] = (record.offset, record.value)
    return out


def _sealed_keys(data: Path, topic: str) -> Counter[bytes | None]:
    """How often each key appears below the active segment of the standby's log."""
    storage = Storage.open(data, read_only=True)
    try:
        plog = storage.log(topic, 0)
        return Counter(r.key for r in plog.records(plog.log_start_offset, plog.segments[-1].base_offset))
    finally:
        storage.close()


def test_a_standby_copies_a_compacted_topic_from_the_start_then_compacts_it(
    leader: BrokerProcess, tmp_path: Path
) -> None:
    _create(leader.bootstrap, "ledger")
    writes = [(b"acct-%d" % (i % 40), b"balance %d " % i * 8) for i in range(1500)]
    _produce(leader.bootstrap, "ledger", writes[:300])
    data = tmp_path / "standby"
    mirror_once(leader.bootstrap, data, "ledger", "--no-compact")
    # segment sizes are the standby's own choice (not mirrored): small ones, so that it has
    # sealed segments to clean (the active one never is, as in Kafka)
    altered = cli_in(
        tmp_path, "topics", "alter", "ledger", "--config", "segment.bytes=4096", "--data", str(data)
    )
    assert altered.returncode == 0, altered.stderr
    _produce(leader.bootstrap, "ledger", writes[300:])
    mirror_once(leader.bootstrap, data, "ledger")
    keys = _sealed_keys(data, "ledger")
    assert keys and max(keys.values()) == 1, "below the active segment every key is there once"
    with served(data) as standby:
        assert offsets(standby.bootstrap, "ledger", 0) == offsets(leader.bootstrap, "ledger", 0)
        assert _latest(standby.bootstrap, "ledger") == _latest(leader.bootstrap, "ledger")


def test_a_standby_left_behind_catches_up_past_the_leaders_new_log_start(
    leader: BrokerProcess, tmp_path: Path
) -> None:
    _create(leader.bootstrap, "balances")
    _produce(leader.bootstrap, "balances", [(b"a-%d" % (i % 30), b"v%d" % i) for i in range(300)])
    data = tmp_path / "standby"
    mirror_once(leader.bootstrap, data, "balances")
    # the standby is stopped; the leader goes on, compacts, and its log start passes the standby's end
    _produce(leader.bootstrap, "balances", [(b"a-%d" % (i % 30), b"w%d" % i) for i in range(300, 1500)])
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    result = admin.delete_records([TopicPartition("balances", 0, 1000)])
    assert next(iter(result.values())).result(DEADLINE_S).low_watermark == 1000
    mirror_once(leader.bootstrap, data, "balances")
    with served(data) as standby:
        assert offsets(standby.bootstrap, "balances", 0) == offsets(leader.bootstrap, "balances", 0)
        ours, theirs = _latest(standby.bootstrap, "balances"), _latest(leader.bootstrap, "balances")
        assert ours == theirs and len(ours) == 30
        assert all(value is not None and value.startswith(b"w") for _offset, value in ours.values())
