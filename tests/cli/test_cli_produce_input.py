"""``logtrove produce`` refuses input UTF-8 cannot hold with one line naming the input
line, a non-zero exit and nothing written (no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CLI = "from logtrove.cli.main import main; main()"


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ('{"value": "\\ud800"}', '"value"'),
        ('{"key": "k\\udfff", "value": "v"}', '"key"'),
        ('{"value": "v", "headers": {"h": "\\udc00"}}', "header 'h'"),
        ('{"value": "v", "headers": [["\\ud800", "v"]]}', "header name"),
    ],
)
def test_lone_surrogate_is_a_one_line_error_with_its_line_number(
    tmp_path: Path, line: str, what: str
) -> None:
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-c", CLI, "produce", "orders", "--data", str(data)],
        input='{"value": "fine"}\n' + line + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    (message,) = done.stderr.strip().splitlines()
    assert message.startswith("error: line 2: ") and what in message and "lone surrogate" in message
    assert message.endswith("nothing was written")
    assert not data.exists()  # checked before the data directory is even opened
