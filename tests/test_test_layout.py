"""No test module imports another test module (issue 17): what tests share lives in helper
modules (``tests/<package>/helpers.py`` and the like, or :mod:`logtrove.testing`) and in
``conftest.py``, so running, moving or deleting one test module never changes another."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", maxsplit=1)[-1].startswith("test_")


def imported_test_modules(source: str) -> list[str]:
    """The test modules ``source`` imports, by dotted name (``tests.a.test_b``), for
    ``import tests.a.test_b``, ``from tests.a.test_b import x``, ``from tests.a import test_b``
    and the relative spellings (``from .test_b import x``, ``from . import test_b``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("tests.") and _is_test_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level == 0 and not module.startswith("tests."):
                continue
            if _is_test_module(module):
                found.append(module)
            else:
                sep = "" if module.endswith(".") else "."
                found += [module + sep + a.name for a in node.names if _is_test_module(a.name)]
    return found


def test_the_check_sees_every_spelling_of_a_test_module_import() -> None:
    source = "\n".join(
        [
            "import tests.broker.test_transactions",
            "from tests.broker.test_transactions import READ_COMMITTED",
            "from tests.http import test_console_browser as base",
            "from .test_readers import written",
            "from . import test_readers",
            "from tests.broker.clients import poll_until",  # a helper module: fine
            "from tests.broker import clients",
            "import pytest",
        ]
    )
    assert imported_test_modules(source) == [
        "tests.broker.test_transactions",
        "tests.broker.test_transactions",
        "tests.http.test_console_browser",
        ".test_readers",
        ".test_readers",
    ]


def test_no_test_module_imports_another_test_module() -> None:
    offenders = {
        str(path.relative_to(TESTS.parent)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "move what they share into a helper module or conftest.py"
