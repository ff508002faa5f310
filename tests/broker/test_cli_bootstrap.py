"""``logtrove topics … --bootstrap`` and ``logtrove produce --bootstrap`` work through a
running broker (which holds the data directory's lock)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.broker import clients

from logtrove.client import HttpApi, KafkaClient, RemoteTagSource
from logtrove.groups.tags import TagFilter
from logtrove.testing import SERVE, BrokerProcess, HttpBrokerProcess, cli_in, free_port, wait_until
from logtrove.wire import ApiKey


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SERVE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_topics_and_produce_through_the_broker(shared_broker: BrokerProcess) -> None:
    b = ["--bootstrap", shared_broker.bootstrap]
    out = _cli("topics", "create", "remote-t", "--partitions", "3", "--config", "retention.ms=60000", *b)
    assert out.returncode == 0, out.stderr
    again = _cli("topics", "create", "remote-t", *b)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr

    lines = [json.dumps({"key": f"k{i}", "value": f"v{i}", "headers": {"id": f"m{i}"}}) for i in range(30)]
    lines.append(json.dumps({"value": "to p0", "partition": 0}))
    out = _cli("produce", "remote-t", "--json", *b, stdin="\n".join(lines) + "\n")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["records"] == 31

    listing = json.loads(_cli("topics", "list", "--json", *b).stdout)
    assert {"name": "remote-t", "partitions": 3, "messages": 31} in listing

    out = _cli("topics", "alter", "remote-t", "--config", "cleanup.policy=compact", "--partitions", "4", *b)
    assert out.returncode == 0, out.stderr
    described = json.loads(_cli("topics", "describe", "remote-t", "--json", *b).stdout)
    assert described["partitions"] == 4
    configs = {c["name"]: c for c in described["configs"]}
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["retention.ms"] == {"name": "retention.ms", "value": "60000", "source": "topic"}
    assert sum(p["log_end_offset"] for p in described["partition_details"]) == 31
    in_p0 = described["partition_details"][0]["log_end_offset"]
    got = clients.consume_confluent(shared_broker.bootstrap, "remote-t", in_p0, partition=0)
    assert (None, b"to p0", []) in got
    assert all(h == [("id", b"m" + k[1:])] for k, _, h in got if k is not None)

    assert _cli("topics", "delete", "remote-t", *b).returncode == 0
    missing = _cli("topics", "describe", "remote-t", *b)
    assert missing.returncode == 1 and "unknown topic" in missing.stderr


def test_unreachable_broker_is_a_clear_error() -> None:
    out = _cli("topics", "list", "--bootstrap", "127.0.0.1:1")
    assert out.returncode == 1
    assert "cannot connect to the broker at 127.0.0.1:1" in out.stderr


def _indexed(args: list[str], cwd: Path) -> tuple[list[int | None], str]:
    out = cli_in(cwd, "topics", "describe", "idx-t", "--json", *args)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["partition_details"]
    return [row.get("indexed_offset", "absent") for row in rows], out.stderr


def test_describe_through_the_broker_says_how_far_it_indexed(tmp_path: Path) -> None:
    broker = HttpBrokerProcess(tmp_path / "data", free_port(), free_port(), "--indexer-flush-s", "0.2")
    broker.start()
    try:
        b = ["--bootstrap", broker.bootstrap]
        assert _cli("topics", "create", "idx-t", "--partitions", "2", *b).returncode == 0
        clients.produce_confluent(broker.bootstrap, "idx-t", [(b"k", b"v%d" % i, []) for i in range(40)])
        elsewhere = tmp_path / "elsewhere"  # no data directory: "another machine"
        elsewhere.mkdir()
        answers: list[list[int | None]] = []

        def caught_up() -> bool:  # the indexer catches up within a few flushes
            answers.append(_indexed([*b, "--http", broker.http], elsewhere)[0])
            return answers[-1] == [40, 0]

        wait_until(caught_up, 60, interval_s=0.2, what=lambda: f"indexed below [40, 0] (last: {answers[-1]})")
        assert answers[-1] == [40, 0]  # partition 1 is empty: indexed below its end, 0
        table = _cli("topics", "describe", "idx-t", *b, "--http", broker.http).stdout
        assert "indexed below" in table and re.search(r"│\s+0\s+│\s+0\s+│\s+40\s+│\s+40\s+│", table)
        # on the broker's machine its data directory answers without HTTP
        assert _indexed([*b, "--data", str(broker.data), "--http", broker.http], elsewhere)[0] == [40, 0]
        assert _indexed([*b, "--data", str(broker.data)], elsewhere)[0] == [40, 0]
        # no way to the broker's files: the offsets are left out with a warning, not made up
        left_out, warning = _indexed([*b, "--http", f"127.0.0.1:{free_port()}"], elsewhere)
        assert left_out == ["absent", "absent"]
        assert "warning: indexed offsets left out: cannot use the broker's HTTP API" in warning
    finally:
        broker.stop()


def test_consume_every_record_through_a_broker_without_http(
    shared_broker: BrokerProcess, tmp_path: Path
) -> None:
    """``--tags '*'`` (the default) reads over Kafka Fetch: the shared broker serves no
    HTTP API, and a position below the log start moves to it."""
    b = ["--bootstrap", shared_broker.bootstrap]
    assert _cli("topics", "create", "plain-c", "--partitions", "2", *b).returncode == 0
    clients.produce_confluent(shared_broker.bootstrap, "plain-c", [(b"k", b"v%d" % i, []) for i in range(30)])
    with KafkaClient(shared_broker.bootstrap) as client:
        body = {"topics": [{"name": "plain-c", "partitions": [{"partition_index": 0, "offset": 5}]}]}
        done = (
            client.request(ApiKey.DELETE_RECORDS, 2, {**body, "timeout_ms": 10_000}).topics[0].partitions[0]
        )
        assert int(done.error_code) == 0 and done.low_watermark == 5
        source = RemoteTagSource(client, HttpApi(f"http://127.0.0.1:{free_port()}"), max_bytes=64)
        below_start = source.fetch("plain-c", 0, TagFilter.parse("*"), 0, 1000)
        assert below_start.records and below_start.records[0].offset == 5
        assert (
            below_start.next_offset == below_start.records[-1].offset + 1 and below_start.log_end_offset == 30
        )
        capped = source.fetch("plain-c", 0, TagFilter.parse("*"), 7, 2)
        assert [r.offset for r in capped.records] == [7, 8] and capped.next_offset == 9

    elsewhere = tmp_path / "elsewhere"  # no data directory here: only the broker can answer
    elsewhere.mkdir()
    out = cli_in(elsewhere, "consume", "plain-c", "-G", "plain", "--json", *b)
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(m["partition"], m["offset"], m["value"]) for m in got] == [(0, i, f"v{i}") for i in range(5, 30)]
    lag = cli_in(elsewhere, "lag", "plain", "--json", *b)
    assert lag.returncode == 0, lag.stderr
    rows = json.loads(lag.stdout)[0]["topics"][0]["partitions"]
    assert [(r["partition"], r["committed_offset"], r["lag"]) for r in rows] == [
        (0, 30, 0),
        (1, None, None),
    ]  # p1: empty, nothing to commit
