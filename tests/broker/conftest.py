"""Fixtures of the broker tests: a real ``logtrove serve`` subprocess per test or per
module (the harness is :mod:`logtrove.testing.broker`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.broker.peer import tansu  # noqa: F401  (fixture of test_peer_broker)
from tests.broker.secured import secured  # noqa: F401  (fixture of test_security)

from logtrove.testing import BrokerProcess, free_port


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "data", free_port()) as proc:
        yield proc


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for a whole module (tests use distinct topic names)."""
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data", free_port()) as proc:
        yield proc
