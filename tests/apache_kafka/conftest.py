"""Fixtures of the tests against Apache Kafka: its jars (fetched by ``scripts/kafka.sh``
into a cache outside the repository, once), a single KRaft broker and a three-node KRaft
cluster (the harness is :mod:`logtrove.testing.kafka`), and a logtrove broker beside
them. Every JVM start costs seconds, so the brokers live for the whole session."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.apache_kafka.differential import compile_java

from logtrove.testing import BrokerProcess, free_port
from logtrove.testing.kafka import KafkaCluster, KafkaJars

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def kafka_jars() -> KafkaJars:
    """Apache Kafka's jars: ``make test`` has fetched them; a bare ``pytest`` fetches them
    here (the same idempotent script)."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "kafka.sh"), "--libs"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return KafkaJars(Path(done.stdout.strip()), ROOT / "scripts" / "kafka" / "log4j2.properties")


@pytest.fixture(scope="package")
def kafka_broker(kafka_jars: KafkaJars, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One Apache Kafka KRaft node (broker and controller) for this package's tests (stopped
    after them: its JVM would otherwise live through the rest of the suite)."""
    with KafkaCluster(kafka_jars, tmp_path_factory.mktemp("kafka"), size=1) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def kafka_cluster(kafka_jars: KafkaJars, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three Apache Kafka KRaft nodes, each broker and controller (three voters)."""
    with KafkaCluster(kafka_jars, tmp_path_factory.mktemp("kafka3"), size=3) as cluster:
        yield cluster


@pytest.fixture(scope="package")
def logtrove_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A logtrove broker for this package's tests, beside the Kafka ones (tests use distinct topic
    names)."""
    with BrokerProcess(tmp_path_factory.mktemp("logtrove") / "data", free_port()) as proc:
        yield proc


@pytest.fixture(scope="session")
def java_classes(kafka_jars: KafkaJars, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Java programs of ``tests/apache_kafka/java``, compiled against Kafka's jars."""
    return compile_java(kafka_jars, tmp_path_factory.mktemp("java"))
