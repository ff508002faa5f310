"""Fixtures of the storage tests; what they share besides fixtures is in ``helpers.py``."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import RAM_DIR


@pytest.fixture
def tmp_path(tmp_path: Path) -> Iterator[Path]:
    """pytest's ``tmp_path``, or a fresh directory in tmpfs (removed afterwards)."""
    if RAM_DIR is None:
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="logtrove-storage-", dir=RAM_DIR))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
