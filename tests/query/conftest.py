"""Fixtures of the query tests; the dataset and the brute-force oracle are in ``helpers.py``."""

from __future__ import annotations

import pytest

from .helpers import Dataset, write_dataset


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """30 k records, written once per test session; tests copy it before changing it."""
    return write_dataset(tmp_path_factory.mktemp("query") / "data", 30_000)
