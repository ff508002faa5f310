"""No test module imports another test module, and nothing imports a ``conftest`` module
(issue 17): what tests share lives in helper modules (``tests/<package>/helpers.py`` and
the like, or :mod:`logtrove.testing`), and ``conftest.py`` holds only fixtures, which
pytest hands to the tests itself. So running, moving or deleting one test module never
changes another, and a fixture file is never also a library."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", maxsplit=1)[-1].startswith("test_")


def _is_conftest(dotted: str) -> bool:
    return dotted.rsplit(".", maxsplit=1)[-1] == "conftest"


def imported_modules(source: str, wanted: Callable[[str], bool]) -> list[str]:
    """The modules of the tests tree that ``source`` imports and ``wanted`` picks, by dotted
    name (``tests.a.test_b``), for ``import tests.a.b``, ``from tests.a.b import x``,
    ``from tests.a import b``, the bare ``import b`` / ``from b import x`` (a module beside
    the rootdir's conftest) and the relative spellings (``from .b import x``,
    ``from . import b``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _in_tests(a.name) and wanted(a.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level == 0 and not _in_tests(module):
                continue
            if wanted(module):
                found.append(module)
            else:
                sep = "" if module.endswith(".") else "."
                found += [module + sep + a.name for a in node.names if wanted(a.name)]
    return found


def _in_tests(dotted: str) -> bool:
    """Whether an absolute import names a module of the tests tree: under ``tests.``, or
    a bare ``conftest`` / ``test_*`` name."""
    return dotted.startswith("tests.") or (
        "." not in dotted and (_is_conftest(dotted) or _is_test_module(dotted))
    )


def imported_test_modules(source: str) -> list[str]:
    """The test modules (``test_*``) ``source`` imports."""
    return imported_modules(source, _is_test_module)


def imported_conftests(source: str) -> list[str]:
    """The ``conftest`` modules ``source`` imports."""
    return imported_modules(source, _is_conftest)


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


def test_the_check_sees_every_spelling_of_a_conftest_import() -> None:
    source = "\n".join(
        [
            "import tests.mirror.conftest",
            "from tests.mirror.conftest import DEADLINE_S, offsets",
            "from tests.cleaner import conftest as shared",
            "from .conftest import TOPIC",
            "from . import conftest",
            "from conftest import RAM_DIR",
            "import conftest",
            "from tests.mirror.helpers import offsets",  # a helper module: fine
            "from .helpers import TOPIC",
            "from _pytest import conftest_like",  # not the tests tree
            "import pytest",
        ]
    )
    assert imported_conftests(source) == [
        "tests.mirror.conftest",
        "tests.mirror.conftest",
        "tests.cleaner.conftest",
        ".conftest",
        ".conftest",
        "conftest",
        "conftest",
    ]


def test_no_test_module_imports_another_test_module() -> None:
    offenders = {
        str(path.relative_to(TESTS.parent)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "move what they share into a helper module or conftest.py"


def test_nothing_imports_a_conftest_module() -> None:
    offenders = {
        str(path.relative_to(TESTS.parent)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_conftests(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "conftest.py holds fixtures only: move what is imported into a helper module"
