"""An unexpected crash of a ``logtrove`` command prints its traceback without the local
variables of its frames: those hold passwords (a SASL token, a properties file's text)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CRASHING = """
import os

from logtrove.cli.main import app

@app.command("crash")
def crash() -> None:
    password = os.environ["CRASH_SECRET"]  # not in the source lines the traceback shows
    raise RuntimeError(f"crashed with a {len(password)}-character secret at hand")

app(["crash"])
"""


def test_a_crash_traceback_does_not_print_local_variables(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"  # a file: rich shows a frame's locals when it has its source
    script.write_text(CRASHING)
    env = {k: v for k, v in os.environ.items() if k != "_TYPER_STANDARD_TRACEBACK"}
    env["CRASH_SECRET"] = "s3cret-in-a-local"
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False, env=env
    )
    assert out.returncode == 1
    assert "crashed with a 17-character secret at hand" in out.stderr  # the traceback is there
    assert "s3cret-in-a-local" not in out.stderr + out.stdout
