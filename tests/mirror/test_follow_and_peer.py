"""``serve --follow`` (the mirror as a thread beside a serving broker) and a foreign leader
(tansu, the peer broker of the benchmarks): the same batches at the same offsets, the
mirrored topics read-only to clients with Kafka's INVALID_TOPIC_EXCEPTION, local groups
working, lag in ``/metrics`` and ``topics describe``, the leader's group commits copied."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.mirror.helpers import DEADLINE_S, mirror_once, offsets, offsets_of, raw_batches, served

from logtrove.client import KafkaClient, KafkaProtocolError
from logtrove.testing import BrokerProcess, HttpBrokerProcess, cli_in, free_port, wait_until
from logtrove.wire import ApiKey


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(DEADLINE_S)


def _produce(bootstrap: str, topic: str, n: int, partitions: int, **config: Any) -> list[Any]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    errors: list[Any] = []
    for i in range(n):
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=b"value %d" % i,
            partition=i % partitions,
            headers=[("id", b"m%d" % i)],
            on_delivery=lambda e, _m: e and errors.append(e),
        )
        producer.poll(0)
    producer.flush(DEADLINE_S)
    return errors


def _caught_up(leader: str, follower: str, topic: str, partitions: int) -> None:
    def same_offsets() -> bool:
        try:
            return all(offsets(follower, topic, p) == offsets(leader, topic, p) for p in range(partitions))
        except KafkaProtocolError:  # not created on the follower yet
            return False

    wait_until(same_offsets, DEADLINE_S, interval_s=0.2, what=f"the follower catching up on {topic}")


def test_serve_follow_mirrors_live_and_clients_may_only_read(leader: BrokerProcess, tmp_path: Path) -> None:
    _create(leader.bootstrap, "live", 2)
    assert not _produce(leader.bootstrap, "live", 500, 2)
    follower = HttpBrokerProcess(
        tmp_path / "follower",
        free_port(),
        free_port(),
        "--follow",
        leader.bootstrap,
        "--follow-topics",
        "live",
    )
    with follower:
        _caught_up(leader.bootstrap, follower.bootstrap, "live", 2)
        assert not _produce(leader.bootstrap, "live", 500, 2, **{"compression.type": "zstd"})
        _caught_up(leader.bootstrap, follower.bootstrap, "live", 2)
        for p in range(2):
            assert raw_batches(follower.bootstrap, "live", p) == raw_batches(leader.bootstrap, "live", p)

        refused = _produce(follower.bootstrap, "live", 1, 1)
        assert [e.code() for e in refused] == [KafkaError.TOPIC_EXCEPTION]
        with KafkaClient(follower.bootstrap) as client:
            body = {
                "topics": [{"name": "live", "partitions": [{"partition_index": 0, "offset": 5}]}],
                "timeout": 5000,
            }
            answer = client.request(ApiKey.DELETE_RECORDS, 2, body).topics[0].partitions[0]
        assert answer.error_code == KafkaError.TOPIC_EXCEPTION  # DeleteRecords: INVALID_TOPIC_EXCEPTION

        local = Consumer(
            {"bootstrap.servers": follower.bootstrap, "group.id": "local", "enable.auto.commit": False}
        )
        local.commit(offsets=[TopicPartition("live", 0, 7)], asynchronous=False)
        assert local.committed([TopicPartition("live", 0)], timeout=10)[0].offset == 7
        local.close()

        source = Consumer(
            {"bootstrap.servers": leader.bootstrap, "group.id": "remote", "enable.auto.commit": False}
        )
        source.commit(offsets=[TopicPartition("live", 1, 99)], asynchronous=False)
        source.close()
        copied = Consumer(
            {"bootstrap.servers": follower.bootstrap, "group.id": "remote", "enable.auto.commit": False}
        )
        wait_until(
            lambda: copied.committed([TopicPartition("live", 1)], timeout=10)[0].offset == 99,
            DEADLINE_S,
            interval_s=0.3,
            what="the leader's commit being copied",
        )
        copied.close()

        with urllib.request.urlopen(f"{follower.http}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
        source_label = f'source="{leader.bootstrap}"'
        assert f'logtrove_mirror_lag_records{{topic="live",partition="0",{source_label}}} 0' in metrics
        assert 'logtrove_mirror_lag_seconds{topic="live",partition="1"' in metrics
        described = cli_in(tmp_path, "topics", "describe", "live", "--json", "--data", str(follower.data))
        assert described.returncode == 0, described.stderr
        mirror = json.loads(described.stdout)["mirror"]
        assert mirror["source"] == leader.bootstrap
        assert [(r["partition"], r["lag_records"]) for r in mirror["partitions"]] == [(0, 0), (1, 0)]

        # a followed topic deleted on the mirror is copied anew, not left half-followed
        admin = AdminClient({"bootstrap.servers": follower.bootstrap})
        admin.delete_topics(["live"])["live"].result(DEADLINE_S)
        _caught_up(leader.bootstrap, follower.bootstrap, "live", 2)
        assert raw_batches(follower.bootstrap, "live", 0) == raw_batches(leader.bootstrap, "live", 0)


def test_a_tansu_leader_is_mirrored_batch_for_batch(tansu: str, tmp_path: Path) -> None:
    _create(tansu, "peer-mirror", 2)
    assert not _produce(tansu, "peer-mirror", 200, 2, **{"compression.type": "lz4"})
    assert not _produce(tansu, "peer-mirror", 100, 2)
    data = tmp_path / "mirror"
    mirror_once(tansu, data, "peer-mirror")
    with served(data) as mirror:
        for p in range(2):
            theirs = raw_batches(tansu, "peer-mirror", p)
            ours = raw_batches(mirror.bootstrap, "peer-mirror", p)
            assert offsets_of(theirs)[-1][1] == 149
            assert ours == theirs
            # tansu's ListOffsets(latest) answers the last batch's base offset + 1 (101 here,
            # Kafka answers 150); the mirror's end is its last batch's end, as Kafka's
            assert offsets(mirror.bootstrap, "peer-mirror", p) == (0, 150)
