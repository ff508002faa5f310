"""A Kafka Streams application with exactly_once_v2 and a state store (word count: a
repartition topic, a changelog topic, transactions per task) runs against logtrove, is
killed with SIGKILL while it counts and restarted, and its output ends exactly as the same
run's on Apache Kafka: every word at its true count, nothing counted twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from tests.apache_kafka import streams

from logtrove.testing import BrokerProcess
from logtrove.testing.kafka import KafkaCluster, KafkaJars


@pytest.mark.slow  # two Streams runs per broker, and a kill
def test_streams_exactly_once_word_count_survives_a_kill(
    kafka_jars: KafkaJars,
    java_classes: Path,
    kafka_broker: KafkaCluster,
    logtrove_broker: BrokerProcess,
    tmp_path: Path,
) -> None:
    answers = {}
    for name, bootstrap in (("kafka", kafka_broker.bootstrap), ("logtrove", logtrove_broker.bootstrap)):
        state = tmp_path / name / "state"
        state.mkdir(parents=True)
        answers[name] = streams.word_count_killed_and_restarted(
            kafka_jars, java_classes, bootstrap, "ks-", state
        )
    assert (
        answers["logtrove"]["counts"] == answers["kafka"]["counts"] == dict(sorted(streams.EXPECTED.items()))
    )

    admin = AdminClient({"bootstrap.servers": logtrove_broker.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert {"ks-wc-app-counts-repartition", "ks-wc-app-counts-changelog"} <= set(topics)
    changelog = ConfigResource(ResourceType.TOPIC, "ks-wc-app-counts-changelog")
    assert admin.describe_configs([changelog])[changelog].result(30)["cleanup.policy"].value == "compact"
