"""The registry of compiled twins (:data:`logtrove.native.EXTENSIONS`): every extension
``setup.py`` builds is listed with the modules of its Python twins; each of those modules
reports ``IMPLEMENTATION`` and takes from its extension only names the registry lists, so
the choice is all or nothing per extension; one environment switch turns every module to
Python."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import logtrove
from logtrove.native import EXTENSIONS, PURE_PYTHON_ENV, Extension, load

SRC = Path(logtrove.__file__).parent
TWINS = sorted(twin for ext in EXTENSIONS for twin in ext.twins)


def _built_by_setup() -> set[str]:
    tree = ast.parse((SRC.parents[1] / "setup.py").read_text())
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Extension"
        and isinstance(node.args[0], ast.Constant)
    }


def _choosers() -> set[str]:
    """The package's modules that import the registry's loader."""
    return {
        "logtrove." + ".".join(path.relative_to(SRC).with_suffix("").parts)
        for path in SRC.rglob("*.py")
        if path.name != "native.py" and "from logtrove.native import" in path.read_text()
    }


def _names_taken(module: str) -> set[str]:
    """Every ``NATIVE.<name>`` the module's source reads."""
    path = SRC.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return {
        node.attr
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "NATIVE"
    }


def test_every_extension_built_and_every_module_choosing_a_twin_is_registered() -> None:
    assert {ext.module for ext in EXTENSIONS} == _built_by_setup()
    assert set(TWINS) == _choosers()
    assert len(TWINS) == len(set(TWINS))  # each module belongs to one extension


@pytest.mark.parametrize("ext", EXTENSIONS, ids=lambda ext: ext.module)
def test_each_extension_is_built_whole_and_its_modules_run_all_of_it(ext: Extension) -> None:
    loaded = importlib.import_module(ext.module)  # `make install` builds every one
    assert [name for name in ext.names if not hasattr(loaded, name)] == []
    taken: set[str] = set()
    for twin in ext.twins:
        module = importlib.import_module(twin)
        assert ("compiled", loaded) == (module.IMPLEMENTATION, module.NATIVE)
        taken |= _names_taken(twin)
    assert taken == set(ext.names)  # no name read that an older build could lack unnoticed


def test_an_older_build_lacking_one_name_or_no_build_means_python() -> None:
    walk = next(ext for ext in EXTENSIONS if ext.module == "logtrove.records._walk")
    assert load(walk) is importlib.import_module(walk.module)
    assert load(Extension(walk.module, (*walk.names, "a_name_no_build_has"), walk.twins)) is None
    assert load(Extension("logtrove.records._no_such_extension", ("walk",), ())) is None


@pytest.mark.parametrize(("switch", "expected"), [({PURE_PYTHON_ENV: "1"}, "python"), ({}, "compiled")])
def test_the_environment_switch_turns_every_module_to_python(switch: dict[str, str], expected: str) -> None:
    script = (
        "import importlib, sys; print(*(importlib.import_module(m).IMPLEMENTATION for m in sys.argv[1:]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, *TWINS],
        env={"PATH": "", **switch},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.split() == [expected] * len(TWINS)
