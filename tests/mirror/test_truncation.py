"""An unclean failover followed as a Kafka follower follows it: a mirror of the old leader
that had more than the promoted standby truncates its diverged suffix (OffsetForLeaderEpoch
against the new leader) and ends byte-equal to the new leader, files included. And a source
that cannot tell (tansu does not serve OffsetForLeaderEpoch) stops the partition with the
reason instead of keeping a log that is not the leader's."""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.mirror.helpers import DEADLINE_S, log_bytes, mirror_once, offsets, raw_batches, served

from logtrove.client import KafkaClient, KafkaProtocolError
from logtrove.mirror import Source, SourceError
from logtrove.records import read_header
from logtrove.storage.follow import read_follow_status
from logtrove.testing import BrokerProcess, HttpBrokerProcess, cli_in, free_port, wait_until

T = "orders"


def _produce(bootstrap: str, prefix: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.num.messages": 5})
    errors: list[object] = []
    for i in range(n):
        producer.produce(
            T,
            key=b"%s-%d" % (prefix.encode(), i),
            value=b"%s %d" % (prefix.encode(), i),
            partition=i % 2,
            on_delivery=lambda e, _m: e and errors.append(e),
        )
    producer.flush(DEADLINE_S)
    assert not errors, errors


def _create(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(T, 2, 1)])[T].result(DEADLINE_S)


def _epochs(bootstrap: str, partition: int) -> list[int]:
    return [read_header(b).partition_leader_epoch for b in raw_batches(bootstrap, T, partition)]


def _metadata_epoch(bootstrap: str) -> int:
    with KafkaClient(bootstrap) as client:
        resp = client.request(3, 12, {"topics": [{"name": T}], "allow_auto_topic_creation": False})
        return int(resp.topics[0].partitions[0].leader_epoch)


def _by_key(data: Path, key: str) -> list[tuple[int, int]]:
    """(partition, offset) of the records with ``key``, by ``logtrove query --key``."""
    out = cli_in(data.parent, "query", T, "--key", key, "--data", str(data), "--json")
    assert out.returncode == 0, out.stderr
    rows, pos, decoder = [], 0, json.JSONDecoder()
    text = out.stdout
    while (pos := text.find("{", pos)) >= 0:  # one JSON object per record, then the completion
        row, pos = decoder.raw_decode(text, pos)
        rows.append(row)
    return sorted((int(r["partition"]), int(r["offset"])) for r in rows if "offset" in r)


def _wait_offsets(
    follower: BrokerProcess, end: int, leader: BrokerProcess | None = None
) -> list[list[bytes]]:
    """Waits until both partitions of the follower end at ``end`` (and, given the leader,
    hold its batches); returns the follower's batches."""

    def caught_up() -> list[list[bytes]] | None:
        try:
            if all(offsets(follower.bootstrap, T, p) == (0, end) for p in (0, 1)):
                batches = [raw_batches(follower.bootstrap, T, p) for p in (0, 1)]
                if leader is None or batches == [raw_batches(leader.bootstrap, T, p) for p in (0, 1)]:
                    return batches
        except KafkaProtocolError:  # not created on the follower yet
            pass
        return None

    return wait_until(
        caught_up,
        DEADLINE_S,
        interval_s=0.2,
        what=lambda: f"the follower catching up ({follower.log.read_text()[-3000:]})",
    )


@pytest.mark.parametrize("live", [True, False], ids=["following-through-the-failover", "restarted-after-it"])
def test_a_mirror_of_the_old_leader_truncates_what_the_promoted_standby_lacks(
    tmp_path: Path, live: bool
) -> None:
    for name in ("old", "follower", "standby"):
        (tmp_path / name).mkdir()
    old = BrokerProcess(tmp_path / "old" / "data", free_port(), "--no-indexer")
    # following through the failover, the follower runs its indexer: the truncation must
    # leave it derived files that agree with the new log (a query by key below)
    follower = BrokerProcess(
        tmp_path / "follower" / "data", free_port(), *(() if live else ("--no-indexer",))
    )
    follower.extra = ("--follow", old.bootstrap, "--follow-topics", T)
    standby = tmp_path / "standby" / "data"
    new = BrokerProcess(standby, old.port, "--no-indexer")  # the old leader's address
    try:
        old.start()
        _create(old.bootstrap)
        _produce(old.bootstrap, "first", 60)
        mirror_once(old.bootstrap, standby, T)  # the standby has offsets 0-29 of each partition
        _produce(old.bootstrap, "late", 40)  # acknowledged, never reached the standby
        assert set(_epochs(old.bootstrap, 0)) == {0}, "a leader stamps its epoch (0) in every batch"
        follower.start()
        _wait_offsets(follower, 50)
        if not live:
            assert follower.stop() == 0
        assert old.stop() == 0
        # unclean failover: the standby is promoted and takes writes at the old leader's address
        promoted = cli_in(tmp_path, "promote", "--data", str(standby))
        assert promoted.returncode == 0, promoted.stderr
        new.start()
        assert _metadata_epoch(new.bootstrap) == 1
        _produce(new.bootstrap, "after", 20)  # offsets 30-39 of each partition, epoch 1
        assert _epochs(new.bootstrap, 0)[-1] == 1
        if not live:
            follower.start()
        batches = _wait_offsets(follower, 40, new)
        assert "truncated the local log from 50 to 30" in follower.log.read_text()
        assert [read_header(b).partition_leader_epoch for b in batches[0]][-1] == 1
        assert follower.stop() == 0
    finally:
        for proc in (follower, new, old):
            proc.stop()
    for p in (0, 1):  # the files too: what the follower would recover after a restart
        assert log_bytes(follower.data, T, p) == log_bytes(standby, T, p)
    found = {key: _by_key(follower.data, key) for key in ("first-3", "late-3", "after-3")}
    assert found == {"first-3": [(1, 1)], "late-3": [], "after-3": [(1, 31)]}
    with served(follower.data) as again:
        assert [offsets(again.bootstrap, T, p) for p in (0, 1)] == [(0, 40), (0, 40)]


def test_a_source_without_leader_epochs_stops_a_diverged_partition_with_the_reason(
    tansu: str,
    tmp_path: Path,
) -> None:
    data = tmp_path / "m" / "data"
    data.parent.mkdir()
    (tmp_path / "first").mkdir()
    with BrokerProcess(tmp_path / "first" / "data", free_port(), "--no-indexer") as first:
        _create(first.bootstrap)
        _produce(first.bootstrap, "first", 20)
        mirror_once(first.bootstrap, data, T)  # offsets 0-9 of each partition
    # the same topic at tansu holds fewer records: the mirror's log runs past its end
    _create(tansu)
    _produce(tansu, "other", 10)
    out = cli_in(data.parent, "mirror", "--from", tansu, "--topics", T, "--data", str(data), "--once")
    assert out.returncode == 1, out.stderr
    assert "past the source's end 5" in out.stderr
    assert "cannot tell where the logs part" in out.stderr
    status = read_follow_status(data)
    assert status is not None
    assert [(r.partition, r.failed.reason if r.failed else None) for r in status.partitions] == [
        (0, "diverged"),
        (1, "diverged"),
    ]
    described = cli_in(data.parent, "topics", "describe", T, "--data", str(data))
    assert described.returncode == 0, described.stderr
    assert "diverged" in described.stdout and f"logtrove topics delete {T}" in described.stdout
    with HttpBrokerProcess(data, free_port(), free_port(), "--no-indexer", "--no-cleaner") as mirror:
        assert [offsets(mirror.bootstrap, T, p) for p in (0, 1)] == [(0, 10), (0, 10)]  # nothing dropped
        with urllib.request.urlopen(f"{mirror.http}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
    for p in (0, 1):
        assert f'logtrove_mirror_partition_stopped{{reason="diverged",topic="{T}",partition="{p}"' in metrics
    assert f'logtrove_mirror_state{{source="{tansu}",state="stopped",reason=""}} 1' in metrics


def _epoch_end(bootstrap: str, epoch: int, current: int = -1, version: int = 4) -> tuple[int, int, int]:
    """(error code, epoch, end offset) of OffsetForLeaderEpoch for partition 0."""
    asked = [{"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]
    body = {"replica_id": -1, "topics": [{"topic": T, "partitions": asked}]}
    with KafkaClient(bootstrap) as client:
        part = client.request(23, version, body).topics[0].partitions[0]
    return int(part.error_code), int(part.leader_epoch), int(part.end_offset)


def test_offset_for_leader_epoch_answers_as_kafka_before_and_after_a_promotion(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    standby = tmp_path / "b" / "data"
    standby.parent.mkdir()
    with BrokerProcess(tmp_path / "a" / "data", free_port(), "--no-indexer") as leader:
        _create(leader.bootstrap)
        _produce(leader.bootstrap, "first", 20)  # offsets 0-9 of each partition, epoch 0
        assert [_epoch_end(leader.bootstrap, 0, version=v) for v in (2, 3, 4)] == [(0, 0, 10)] * 3
        assert _epoch_end(leader.bootstrap, 3) == (0, -1, -1)  # newer than any: undefined
        mirror_once(leader.bootstrap, standby, T)
        with served(standby) as mirror:  # a follower answers from the leader's epochs it copied
            assert _epoch_end(mirror.bootstrap, 0) == (0, 0, 10)
    assert cli_in(tmp_path, "promote", "--data", str(standby)).returncode == 0
    with BrokerProcess(standby, free_port(), "--no-indexer") as promoted:
        assert _epoch_end(promoted.bootstrap, 1) == (0, 1, 10)  # the new epoch starts at the log end
        _produce(promoted.bootstrap, "after", 10)  # offsets 10-14, epoch 1
        assert _epoch_end(promoted.bootstrap, 0) == (0, 0, 10)  # epoch 0 ends where 1 begins
        assert _epoch_end(promoted.bootstrap, 1) == (0, 1, 15)
        assert _epoch_end(promoted.bootstrap, 0, current=1) == (0, 0, 10)
        assert (
            _epoch_end(promoted.bootstrap, 0, current=0)[0] == 74
        )  # FENCED_LEADER_EPOCH: an old leader's view
        assert _epoch_end(promoted.bootstrap, 0, current=2)[0] == 75  # UNKNOWN_LEADER_EPOCH: newer than ours


def test_a_leader_epoch_other_than_the_metadatas_is_asked_again_not_judged(tmp_path: Path) -> None:
    """Regression: a mirror that reconnected to a promoted leader before its metadata was
    refreshed asked OffsetForLeaderEpoch with the old epoch; the leader fenced the request,
    the partition was left out as "the epochs cannot tell", and a diverged partition was
    stopped instead of truncated (a flaky failover test). Now the stale epoch is a
    :class:`SourceError` (the round retries), and the mirror refreshes its metadata after
    any such failure."""
    (tmp_path / "a").mkdir()
    with BrokerProcess(tmp_path / "a" / "data", free_port(), "--no-indexer") as leader:
        _create(leader.bootstrap)
        _produce(leader.bootstrap, "first", 20)  # epoch 0, offsets 0-9 of each partition
        source = Source(leader.bootstrap)
        try:
            topic = source.topics(re.compile(T))[T]
            assert source.epoch_end_offsets(topic, {0: 0}) == {0: (0, 10)}
            # the metadata says epoch 3, the leader is at 0: UNKNOWN_LEADER_EPOCH (and the
            # other way round, FENCED_LEADER_EPOCH, after a promotion the mirror missed)
            wrong = dataclasses.replace(topic, epochs={**topic.epochs, 0: 3})
            with pytest.raises(SourceError, match="asking again after a metadata refresh"):
                source.epoch_end_offsets(wrong, {0: 0})
        finally:
            source.close()
