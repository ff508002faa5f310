"""Lag of read_committed groups over a transactional topic: measured to the last stable
offset, tag counts leaving out aborted records (brute force from what was written), and
``--isolation read_uncommitted`` measuring to the log end; locally, through the broker
(confluent-kafka's transactional producer, ``logtrove lag --bootstrap``) and over HTTP."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker.txn_clients import txn_producer

from logtrove.groups.consumer import StoreCommitter
from logtrove.groups.lag import LagMonitor
from logtrove.groups.subscriptions import append_subscription
from logtrove.groups.tags import TagFilter
from logtrove.records import NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.testing import FakeClock, HttpBrokerProcess, free_port
from logtrove.txn import MarkerType, TxnIndexes, marker_batch

TOPIC = "tx"
TAGS = [b"A", b"B"]


class Written:
    """Every offset written: its tag, and whether a read_committed reader sees it."""

    def __init__(self) -> None:
        self.tags: dict[int, bytes] = {}
        self.pending: dict[int, list[int]] = {}
        self.visible: set[int] = set()


def append(log: PartitionLog, indexes: TxnIndexes, w: Written, pid: int, rng: random.Random, t: int) -> None:
    tags = [rng.choice(TAGS) for _ in range(rng.randrange(1, 4))]
    records = [NewRecord(b"v", None, (("tag", tag),), t) for tag in tags]
    txns = indexes.get(log) if pid >= 0 else None
    appended = log.append(build_batch(records, producer_id=pid, producer_epoch=0, transactional=pid >= 0))
    offsets = list(range(appended.base_offset, appended.last_offset + 1))
    w.tags.update(zip(offsets, tags, strict=True))
    if txns is not None:
        txns.on_transactional_batch(pid, appended.base_offset)
        w.pending.setdefault(pid, []).extend(offsets)
    else:
        w.visible.update(offsets)


def end_txn(log: PartitionLog, indexes: TxnIndexes, w: Written, pid: int, commit: bool) -> None:
    indexes.get(log)
    offset = log.append(marker_batch(pid, 0, commit, coordinator_epoch=0, now_ms=1)).base_offset
    indexes.on_marker(log, pid, MarkerType.COMMIT if commit else MarkerType.ABORT, offset)
    done = w.pending.pop(pid, [])
    if commit:
        w.visible.update(done)


def test_read_committed_lag_ends_at_the_lso_and_tag_lag_skips_aborted_records(tmp_path: Path) -> None:
    rng = random.Random(4)
    clock = FakeClock(1_000_000)
    with Storage.open(tmp_path / "data", clock=clock) as storage:
        storage.create_topic(TOPIC, 1, {"segment.bytes": "4096", "message.tag.header": "tag"})
        log, indexes, w = storage.log(TOPIC, 0), TxnIndexes(), Written()
        for n in range(300):
            pid = rng.choice([-1, 1, 2, 3])
            if pid >= 0 and pid in w.pending and rng.random() < 0.3:
                end_txn(log, indexes, w, pid, commit=rng.random() < 0.5)
            else:
                append(log, indexes, w, pid, rng, 1_000 + n)
        for pid in list(w.pending)[1:]:
            end_txn(log, indexes, w, pid, commit=False)
        assert len(w.pending) == 1  # one transaction left open: the LSO stops at it
        lso = min(min(offsets) for offsets in w.pending.values())
        end = log.log_end_offset
        assert lso < end
        append_subscription(storage, "g", TOPIC, "A")
        committer = StoreCommitter(storage)
        committed_mon = LagMonitor(storage, clock=clock)
        raw_mon = LagMonitor(storage, clock=clock, read_committed=False)
        for c in (0, lso // 3, lso - 1, lso, end):
            committer.commit("g", TOPIC, {0: c})
            committed_mon.refresh()
            raw_mon.refresh()
            row = committed_mon.group_lag("g").partitions()[0]
            raw = raw_mon.group_lag("g").partitions()[0]
            assert (row.lag, row.last_stable_offset) == (max(lso - c, 0), lso)
            assert raw.lag == end - c and raw.last_stable_offset is None
            brute = sum(1 for o in w.visible if c <= o < lso and TagFilter.parse("A").matches(w.tags[o]))
            assert row.tag_lag == brute
            assert raw.tag_lag == sum(1 for o, tag in w.tags.items() if o >= c and tag == b"A")


def _lag_json(data: Path, bootstrap: str, *extra: str) -> Any:
    main = "from logtrove.cli.main import main; main()"
    cmd = [sys.executable, "-c", main, "lag", "g", "--json", "-b", bootstrap, "--data", str(data)]
    out = subprocess.run([*cmd, *extra], capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(out.stdout)
    return found[0] if isinstance(found, list) else found


def test_lag_through_the_broker_is_measured_to_the_last_stable_offset(tmp_path: Path) -> None:
    with HttpBrokerProcess(tmp_path / "data", free_port(), free_port()) as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("txl", 1, 1)])["txl"].result(10)
        done = txn_producer(bootstrap, "txl-done")
        done.begin_transaction()
        for i in range(10):
            done.produce("txl", value=b"c%d" % i)
        done.commit_transaction(10)  # offsets 0-9, marker at 10
        pending = txn_producer(bootstrap, "txl-open")
        pending.begin_transaction()
        for i in range(5):
            pending.produce("txl", value=b"o%d" % i)
        pending.flush(10)  # 11-15, open
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("txl", 0, 4)], asynchronous=False)
        consumer.close()

        committed = _lag_json(broker.data, bootstrap)
        uncommitted = _lag_json(broker.data, bootstrap, "--isolation", "read_uncommitted")
        (row,) = committed["topics"][0]["partitions"]
        (raw,) = uncommitted["topics"][0]["partitions"]
        assert (row["lag"], row["last_stable_offset"]) == (11 - 4, 11)
        assert raw["lag"] == 16 - 4
        with urllib.request.urlopen(f"{broker.http}/api/v1/groups/g", timeout=10) as answer:
            http = json.load(answer)
        (over_http,) = http["partitions"]
        assert (over_http["lag"], over_http["last_stable_offset"]) == (7, 11)
        pending.commit_transaction(10)
        after = _lag_json(broker.data, bootstrap)
        assert after["topics"][0]["partitions"][0]["lag"] == 17 - 4
