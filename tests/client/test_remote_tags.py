"""Tag-filtered consumption and tag-aware lag against a running broker, from "another
machine": a real `logtrove serve` subprocess with its HTTP API on a free port, a mixed-tag
topic produced by confluent-kafka, and no access to the broker's data directory. Records
are filtered by the broker (`/tags/fetch`, `.tagidx`), commits go over the Kafka protocol,
and `logtrove lag --bootstrap --http` counts tags through the broker (`/tags/count`).

The expected answers are brute force: every record read back with a plain confluent-kafka
consumer and its tag header compared.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.client import BrokerCommitter, HttpApi, HttpApiError, KafkaClient, RemoteTagSource, cluster_id
from logtrove.groups.consumer import TagConsumer
from logtrove.testing import HttpBrokerProcess, cli_in, free_port, wait_until

PARTITIONS = 2
PER_PARTITION = 2500
TAGS: list[bytes | None] = [b"TagA", b"TagB", b"TagC", None, b"TagA", b"TagB", b"TagD"]
Tags = dict[int, list[bytes | None]]  # partition -> tag of each offset (None: untagged)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpBrokerProcess]:
    with HttpBrokerProcess(tmp_path_factory.mktemp("remote-tags") / "data", free_port(), free_port()) as proc:
        yield proc


def _mixed_topic(broker: HttpBrokerProcess, topic: str) -> Tags:
    """PARTITIONS × PER_PARTITION records, tags cycling through TAGS (some untagged);
    returns the tags as read back from the broker (brute force)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            tag = TAGS[(i + p) % len(TAGS)]
            headers = [("id", b"m-%d-%d" % (p, i))] + ([("tag", tag)] if tag is not None else [])
            producer.produce(
                topic, key=b"k%d" % (i % 50), value=b"v-%d-%d" % (p, i), partition=p, headers=headers
            )
    assert producer.flush(30) == 0
    return _read_back(broker.bootstrap, topic)


def _read_back(bootstrap: str, topic: str) -> Tags:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "brute-force", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    tags: Tags = {p: [] for p in range(PARTITIONS)}

    def all_read() -> bool:
        for m in consumer.consume(1000, 0.5):
            assert m.error() is None, m.error()
            assert m.offset() == len(tags[m.partition()]), "offsets are dense"
            tags[m.partition()].append(dict(m.headers() or []).get("tag"))
        return sum(map(len, tags.values())) >= PARTITIONS * PER_PARTITION

    try:
        wait_until(
            all_read,
            60,
            interval_s=0,
            what=lambda: f"every record read back ({[len(t) for t in tags.values()]})",
        )
    finally:
        consumer.close()
    assert [len(t) for t in tags.values()] == [PER_PARTITION] * PARTITIONS
    return tags


def _matching(tags: Tags, p: int, wanted: set[bytes], start: int = 0) -> list[int]:
    return [o for o in range(start, len(tags[p])) if tags[p][o] in wanted]


def _lag(broker: HttpBrokerProcess, cwd: Path, group: str) -> list[dict[str, Any]]:
    """Per partition rows of ``logtrove lag GROUP --bootstrap … --http … --json``."""
    done = cli_in(cwd, "lag", group, "--json", "--bootstrap", broker.bootstrap, "--http", broker.http)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    (g,) = json.loads(done.stdout)
    (t,) = g["topics"]
    return sorted(t["partitions"], key=lambda r: r["partition"])


def _get(url: str) -> tuple[int, str, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.headers["content-type"], json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["content-type"], json.loads(exc.read())


def test_remote_tag_consumer_gets_exactly_the_matching_records_and_lag_reaches_zero(
    broker: HttpBrokerProcess, tmp_path: Path
) -> None:
    topic, group, wanted = "mixed-api", "billing", {b"TagA", b"TagC"}
    tags = _mixed_topic(broker, topic)
    subscribed = cli_in(
        tmp_path, "groups", "subscribe", group, topic, "--tags", "TagA || TagC", "-b", broker.bootstrap
    )
    assert subscribed.returncode == 0, subscribed.stderr
    with KafkaClient(broker.bootstrap) as client:
        committer = BrokerCommitter(client)
        api = HttpApi(broker.http, cluster_id=cluster_id(client))
        # tag-aware lag at several committed positions equals the brute-force count
        for commits in ({0: 0, 1: 0}, {0: 1234, 1: 777}, {0: PER_PARTITION - 1, 1: 5}):
            committer.commit(group, topic, commits)
            rows = _lag(broker, tmp_path, group)
            assert [r["committed_offset"] for r in rows] == [commits[0], commits[1]]
            assert [r["lag"] for r in rows] == [PER_PARTITION - commits[p] for p in (0, 1)], "Kafka's number"
            assert [r["tag_lag"] for r in rows] == [
                len(_matching(tags, p, wanted, commits[p])) for p in (0, 1)
            ]
            assert all(r["tag_time_lag_ms"] is not None for r in rows)
        committer.commit(group, topic, {0: 0, 1: 0})

        consumer = TagConsumer(
            RemoteTagSource(client, api), topic, "TagA || TagC", group=group, committer=committer
        )
        got: dict[int, list[int]] = {0: [], 1: []}
        for _ in range(PARTITIONS * PER_PARTITION):  # bounded: every poll returns ≥ 1 record or ends
            batch = consumer.poll(300)
            if not batch:
                break
            for c in batch:
                assert c.record.header("tag") in wanted
                got[c.partition].append(c.record.offset)
            consumer.commit()
        consumer.commit()
        assert consumer.at_end()
        for p in (0, 1):
            assert got[p] == _matching(tags, p, wanted), "all of them, in order, none of the others"
    rows = _lag(broker, tmp_path, group)
    assert [(r["committed_offset"], r["lag"], r["tag_lag"]) for r in rows] == [(PER_PARTITION, 0, 0)] * 2
    assert [(r["time_lag_ms"], r["tag_time_lag_ms"]) for r in rows] == [(0, 0)] * 2


def test_consume_cli_through_the_broker_filters_there_and_commits_past_skipped_records(
    broker: HttpBrokerProcess, tmp_path: Path
) -> None:
    topic, group = "mixed-cli", "ops"
    tags = _mixed_topic(broker, topic)
    boot = ["--bootstrap", broker.bootstrap, "--http", broker.http]
    subscribed = cli_in(
        tmp_path, "groups", "subscribe", group, topic, "--tags", "TagB", "-b", broker.bootstrap
    )
    assert subscribed.returncode == 0, subscribed.stderr

    first = cli_in(
        tmp_path, "consume", topic, "--group", group, "--tags", "TagB", "--json", "--count", "100", *boot
    )
    assert first.returncode == 0, first.stderr
    rest = cli_in(tmp_path, "consume", topic, "--group", group, "--tags", "TagB", "--json", *boot)
    assert rest.returncode == 0, rest.stderr
    lines = [json.loads(line) for line in (first.stdout + rest.stdout).splitlines()]
    assert len(lines) > 100, "the second run resumed from the first one's commits"
    for p in (0, 1):
        offsets = [m["offset"] for m in lines if m["partition"] == p]
        assert offsets == _matching(tags, p, {b"TagB"}), "every TagB record once, in order"
    assert all({"key": "tag", "value": "TagB"} in m["headers"] for m in lines)
    rows = _lag(broker, tmp_path, group)
    assert [(r["lag"], r["tag_lag"]) for r in rows] == [(0, 0)] * 2, "commits moved past the other tags"

    more = Producer({"bootstrap.servers": broker.bootstrap})
    for tag in (b"TagB", b"TagA", b"TagB"):
        more.produce(topic, value=b"late", partition=1, headers=[("tag", tag)])
    assert more.flush(30) == 0
    rows = _lag(broker, tmp_path, group)
    assert [(r["lag"], r["tag_lag"]) for r in rows] == [(0, 0), (3, 2)], "raw lag stays Kafka's number"


def test_tag_endpoints_return_the_next_position_and_refuse_bad_input(
    broker: HttpBrokerProcess, tmp_path: Path
) -> None:
    topic = "mixed-http"
    tags = _mixed_topic(broker, topic)
    base = f"{broker.http}/api/v1/topics/{topic}/partitions/0/tags"
    status, _, page = _get(f"{base}/fetch?tags=TagD&offset=10&max_records=2")
    want = _matching(tags, 0, {b"TagD"}, 10)
    assert status == 200 and [m["offset"] for m in page["messages"]] == want[:2]
    assert (page["next_offset"], page["reason"]) == (want[1] + 1, "limit reached")
    status, _, page = _get(f"{base}/fetch?tags=TagA%20%7C%7C%20TagB&offset={want[1] + 1}&max_bytes=1")
    assert len(page["messages"]) == 1, "a byte budget still returns one record"
    assert page["next_offset"] == page["messages"][0]["offset"] + 1
    status, _, page = _get(f"{base}/fetch?tags=Nobody")
    assert (page["messages"], page["next_offset"], page["reason"]) == ([], PER_PARTITION, "log end")

    status, _, count = _get(f"{base}/count?tags=TagD&offset=100&end_offset=2000")
    assert status == 200 and count["matching"] == len(
        [o for o in _matching(tags, 0, {b"TagD"}, 100) if o < 2000]
    )

    for url, code, kind in (
        (f"{base}/fetch?tags=TagA%20%7C%7C", 422, "invalid-tags"),
        (f"{base}/fetch?offset={PER_PARTITION + 1}", 422, "offset-out-of-range"),
        (f"{base}/count?offset=50&end_offset=10", 422, "invalid-range"),
        (f"{broker.http}/api/v1/topics/nope/partitions/0/tags/fetch", 404, "unknown-topic"),
        (f"{broker.http}/api/v1/topics/{topic}/partitions/7/tags/count", 404, "unknown-partition"),
    ):
        status, content_type, problem = _get(url)
        assert (status, content_type, problem["type"]) == (
            code,
            "application/problem+json",
            f"urn:logtrove:problem:{kind}",
        )

    with pytest.raises(HttpApiError, match="serves cluster"):
        HttpApi(broker.http, cluster_id="another-cluster").get(
            f"/api/v1/topics/{topic}/partitions/0/tags/count", {}
        )


def test_without_a_reachable_http_api_lag_warns_and_consume_fails_clearly(
    broker: HttpBrokerProcess, tmp_path: Path
) -> None:
    topic, group = "mixed-nohttp", "nohttp"
    _mixed_topic(broker, topic)
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens there
    assert (
        cli_in(
            tmp_path, "groups", "subscribe", group, topic, "--tags", "TagA", "-b", broker.bootstrap
        ).returncode
        == 0
    )
    with KafkaClient(broker.bootstrap) as client:
        BrokerCommitter(client).commit(group, topic, {0: 10, 1: 20})
    done = cli_in(tmp_path, "lag", group, "--json", "--bootstrap", broker.bootstrap, "--http", nowhere)
    assert done.returncode == 0, done.stderr
    assert "no tag-aware lag" in done.stderr and nowhere in done.stderr
    (g,) = json.loads(done.stdout)
    rows = g["topics"][0]["partitions"]
    assert [(r["lag"], r["tag_lag"]) for r in rows] == [
        (PER_PARTITION - 10, None),
        (PER_PARTITION - 20, None),
    ]

    failed = cli_in(
        tmp_path, "consume", topic, "--tags", "TagA", "--bootstrap", broker.bootstrap, "--http", nowhere
    )
    assert failed.returncode == 1 and "HTTP API" in failed.stderr and "Traceback" not in failed.stderr
