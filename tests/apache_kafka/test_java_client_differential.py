"""Kafka's Java client (KafkaProducer, KafkaConsumer, Admin) observes the same answers
from logtrove as from Apache Kafka, through one scenario (``java/ClientScenarios.java``):
an idempotent producer in each codec with headers, null keys and a 700 kB record, a
consumer's reads, positions, seeks and ``offsetsForTimes``; Admin's topic, config, offset
and record APIs with their error paths; a classic and a consumer-protocol group with
commits, descriptions and deletion; a transactional producer's commits and abort as
read_committed and read_uncommitted consumers and Admin see them; pause and resume, two
cooperative-sticky members, a static member that stays after closing. Every difference is either gone or listed with its
reason in ``docs/KAFKA_APIS.md``, and every row there is still observed."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.apache_kafka import differential
from tests.apache_kafka.differential import Finding

from logtrove.testing import BrokerProcess
from logtrove.testing.kafka import KafkaCluster, KafkaJars

Observations = dict[tuple[str, str], object]


@pytest.fixture(scope="module")
def observed(
    kafka_jars: KafkaJars,
    java_classes: Path,
    kafka_broker: KafkaCluster,
    logtrove_broker: BrokerProcess,
) -> tuple[Observations, Observations]:
    classes = java_classes
    t0 = differential.recent_t0()
    kafka = differential.observe(kafka_jars, classes, kafka_broker.bootstrap, "dj-", t0)
    logtrove = differential.observe(kafka_jars, classes, logtrove_broker.bootstrap, "dj-", t0)
    return kafka, logtrove


@pytest.fixture(scope="module")
def findings(observed: tuple[Observations, Observations]) -> list[Finding]:
    return differential.compare(*observed)


def test_the_scenario_observed_what_it_did(observed: tuple[Observations, Observations]) -> None:
    """On both brokers the scenario's records came back: a broken scenario must not pass
    as two equal empty answers."""
    for side in observed:
        consumed = side[("produce", "consumed")]
        assert isinstance(consumed, list)
        assert [r["offset"] for r in consumed] == list(range(20))
        assert {tuple(h) for r in consumed for h in r["headers"] if h[0] == "codec"} == {
            ("codec", c) for c in ("none", "gzip", "snappy", "lz4", "zstd")
        }
        assert sorted(r["valueLength"] for r in consumed)[-5:] == [700_000] * 5
        assert side[("transactions", "consumed read_committed")] == [
            [0, "t0"],
            [1, "t1"],
            [2, "t2"],
            [7, "t5"],
        ]
        assert side[("consumer features", "cooperative partitions")] == [0, 1, 2, 3]
        for protocol in ("classic", "consumer"):
            assert side[(f"group {protocol}", "committed")] == {"0": [3, "meta-0"], "1": [5, ""]}


def test_every_difference_is_documented(findings: list[Finding]) -> None:
    missing = differential.unexplained(findings, differential.documented())
    assert not missing, "differences not in docs/KAFKA_APIS.md:\n" + "\n".join(map(str, missing))


def test_every_documented_difference_is_still_observed(findings: list[Finding]) -> None:
    stale = differential.unused(findings, differential.documented())
    assert not stale, f"rows of docs/KAFKA_APIS.md that no longer differ: {stale}"


def test_the_normalisation_hides_node_ids_only() -> None:
    kafka = {("s", "w"): {"leader": 1, "coordinator": 1, "offset": 1}}
    logtrove = {("s", "w"): {"leader": 0, "coordinator": None, "offset": 2}}
    assert [f.path for f in differential.compare(kafka, logtrove)] == ["s/w/coordinator", "s/w/offset"]


def test_docs_table_is_read() -> None:
    rows = differential.documented()
    assert rows, "the differences table has no rows"
    assert all(reason for reason in rows.values())
