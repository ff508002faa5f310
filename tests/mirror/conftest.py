"""Fixtures of the mirror tests: a shared logtrove leader, a tansu leader and a leader with
SASL and TLS listeners. What the tests share besides fixtures is in ``helpers.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.broker.peer import tansu  # noqa: F401  (a tansu leader)
from tests.broker.secured import secured  # noqa: F401  (a leader with SASL and TLS listeners)

from logtrove.testing import BrokerProcess, free_port


@pytest.fixture(scope="module")
def leader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A logtrove leader whose cleaner runs often (tests use distinct topic names)."""
    data = tmp_path_factory.mktemp("leader") / "data"
    with BrokerProcess(data, free_port(), "--cleaner-interval-s", "0.2", "--no-indexer") as proc:
        yield proc
