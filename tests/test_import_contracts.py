"""The import contracts in pyproject.toml hold, and can fail: each test breaks a copy of
the package in one way the contracts forbid and expects ``lint-imports`` to say so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the package and its contracts."""
    shutil.copytree(
        ROOT / "src" / "logtrove", tmp_path / "src" / "logtrove", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _append(module: Path, line: str) -> None:
    with module.open("a", encoding="utf-8") as f:
        f.write(f"\n{line}  # noqa\n")


def test_the_package_keeps_every_contract(project: Path) -> None:
    out = _lint(project)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "broken" not in out.stdout.split("Contracts:")[-1].replace("0 broken", "")


def test_a_lower_layer_importing_an_upper_one_breaks_the_layers(project: Path) -> None:
    _append(project / "src/logtrove/storage/names.py", "import logtrove.cli.common")
    out = _lint(project)
    assert out.returncode != 0
    assert "logtrove.storage.names -> logtrove.cli.common" in out.stdout


def test_siblings_of_one_layer_may_not_import_each_other(project: Path) -> None:
    _append(project / "src/logtrove/client/errors.py", "import logtrove.txn.state")
    out = _lint(project)
    assert out.returncode != 0
    assert "logtrove.client.errors -> logtrove.txn.state" in out.stdout


def test_a_renamed_layer_breaks_the_contract_instead_of_being_skipped(project: Path) -> None:
    config = project / "pyproject.toml"
    config.write_text(config.read_text("utf-8").replace('  "mirror",\n', '  "mirrors",\n', 1), "utf-8")
    assert '"mirrors"' in config.read_text("utf-8")
    out = _lint(project)
    assert out.returncode != 0
    assert "mirrors" in out.stdout + out.stderr


def test_a_new_package_must_be_given_a_layer(project: Path) -> None:
    (project / "src/logtrove/extras").mkdir()
    (project / "src/logtrove/extras/__init__.py").write_text('"""Not placed in any layer."""\n', "utf-8")
    out = _lint(project)
    assert out.returncode != 0
    assert "logtrove.extras" in out.stdout


@pytest.mark.parametrize(
    ("module", "package"),
    [
        ("storage/names.py", "fastapi"),
        ("records/varint.py", "typer"),
        ("groups/lag.py", "rich"),
        ("query/ids.py", "pyspark"),
        ("client/errors.py", "typer"),
        ("broker/limits.py", "fastapi"),
    ],
)
def test_a_forbidden_third_party_package_breaks_its_contract(
    project: Path, module: str, package: str
) -> None:
    _append(project / "src/logtrove" / module, f"import {package}")
    out = _lint(project)
    assert out.returncode != 0
    assert f"-> {package}" in out.stdout


def test_an_import_cycle_inside_a_package_breaks_the_contract(project: Path) -> None:
    _append(project / "src/logtrove/cli/common.py", "import logtrove.cli.main")
    out = _lint(project)
    assert out.returncode != 0
    assert "No cycles are allowed in logtrove.cli" in out.stdout


def test_a_reader_of_derived_files_importing_the_writer_breaks_the_contracts(project: Path) -> None:
    _append(project / "src/logtrove/storage/derived/views.py", "import logtrove.storage.derived.indexer")
    out = _lint(project)
    assert out.returncode != 0
    assert "logtrove.storage.derived.views -> logtrove.storage.derived.indexer" in out.stdout
    assert "Queries and tag reads use the derived-index readers, never the writer BROKEN" in " ".join(
        out.stdout.split()
    )


def test_a_handler_naming_the_server_breaks_the_contract(project: Path) -> None:
    """Handlers see the broker through its context; one that names the server, even for
    type checking only, makes a cycle (the server imports every handler)."""
    _append(project / "src/logtrove/broker/fetch.py", "if TYPE_CHECKING:\n    import logtrove.broker.server")
    out = _lint(project)
    assert out.returncode != 0
    assert "No cycles are allowed in logtrove.broker" in out.stdout


def test_the_http_api_importing_the_index_writer_breaks_the_contract(project: Path) -> None:
    _append(project / "src/logtrove/http/api/health.py", "import logtrove.storage.derived.indexer")
    out = _lint(project)
    assert out.returncode != 0
    assert "The HTTP API, the clients and Spark import no index writer module themselves BROKEN" in " ".join(
        out.stdout.split()
    )
