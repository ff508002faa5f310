"""Choosing between a compiled twin and its pure-Python original (logtrove.native)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from logtrove.native import native


def test_a_built_extension_gives_its_names_in_the_order_asked() -> None:
    found = native("logtrove.records._walk", "pick_window", "pick_offset")
    if found is None:
        pytest.fail("the C extensions are built by `make install`; _walk is missing")
    from logtrove.records import _walk

    assert found == (_walk.pick_window, _walk.pick_offset)
    assert native("logtrove.records._walk", "walk") is _walk.walk


def test_a_missing_extension_or_an_older_build_means_none() -> None:
    assert native("logtrove.records._no_such_extension", "walk") is None
    assert native("logtrove.records._walk", "walk", "a_name_no_build_has") is None


def test_the_environment_variable_forces_the_python_twins_everywhere() -> None:
    script = (
        "from logtrove.native import native;"
        "from logtrove.records import walk, pick, columnar, encoder;"
        "from logtrove.storage.cleaner import passes;"
        "from logtrove.storage.derived import blockentries;"
        "print(native('logtrove.records._walk', 'walk') is None,"
        " walk.IMPLEMENTATION, pick.IMPLEMENTATION, columnar.IMPLEMENTATION,"
        " encoder.IMPLEMENTATION, passes.IMPLEMENTATION, blockentries.IMPLEMENTATION)"
    )
    forced = subprocess.run(
        [sys.executable, "-c", script],
        env={"LOGTROVE_PURE_PYTHON": "1", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert forced.stdout.split() == ["True"] + ["python"] * 6
    default = subprocess.run(
        [sys.executable, "-c", script],
        env={"PATH": ""},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert default.stdout.split() == ["False"] + ["compiled"] * 6
