"""Which tests share one parallel worker.

``make test`` runs pytest-xdist with ``--dist loadgroup``: tests with the same
``xdist_group`` mark run on one worker, the others go to whichever worker is free. A
session-scoped fixture is set up once per worker that uses it, so the tests of each heavy
peer are grouped by the fixture they use, and its JVMs start once rather than on every
worker: the Spark session (about 1 GB) and Apache Kafka (a node, a three-node cluster and
the jars the clients compile against).
"""

from __future__ import annotations

import pytest

GROUP_OF_FIXTURE = {
    "spark": "spark",
    "kafka_jars": "apache-kafka",
    "kafka_broker": "apache-kafka",
    "kafka_cluster": "apache-kafka",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test that uses a fixture of :data:`GROUP_OF_FIXTURE`, directly or through
    another fixture, with that fixture's group."""
    for item in items:
        used = getattr(item, "fixturenames", ())
        for group in sorted({GROUP_OF_FIXTURE[name] for name in used if name in GROUP_OF_FIXTURE}):
            item.add_marker(pytest.mark.xdist_group(group))
