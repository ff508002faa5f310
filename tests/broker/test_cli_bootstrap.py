"""``logtrove topics … --bootstrap`` and ``logtrove produce --bootstrap`` work through a
running broker (which holds the data directory's lock)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.broker import clients
from tests.broker.conftest import SERVE, BrokerProcess


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
