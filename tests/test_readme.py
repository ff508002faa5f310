"""README.md's examples, run in order as a reader runs them.

Every ```` ```sh ````, ```` ```bash ```` and ```` ```python ```` block of README.md runs, top
to bottom, in one fresh working directory that holds only ``.venv`` (a link to this
checkout's venv): a shell block with ``bash -euo pipefail``, a Python block with the venv's
interpreter, neither with the venv activated. A block that fails fails the test, naming
the block and its line.

An HTML comment on the line before a block says how to treat it:

``<!-- readme-test: broker -->``
    The block starts the broker (``make run``). The harness starts it the way ``make run``
    does (``.venv/bin/logtrove serve --data ./data --listen HOST:PORT``, HTTP API beside
    it) and keeps it running for the blocks that follow; the block itself is only checked.
``<!-- readme-test: syntax-only -->``
    Only checked (``bash -n``, ``compile()``): another host's address, a server that runs
    until stopped, a tool that is not installed here.
``<!-- readme-test: slow -->``
    A Spark job (a JVM of its own, 10-30 s); run like the others.

The broker listens on free ports; the examples' ``:9092`` and ``:8080`` are replaced by
them before a block runs.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from logtrove.testing import free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
VENV = ROOT / ".venv"
KINDS = {"run", "broker", "syntax-only", "slow"}
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*readme-test:\s*([\w-]+)\s*-->\s*$")
BLOCK_TIMEOUT_S = 600  # a shared, loaded machine: a dozen CLI starts can take minutes
SLOW_BLOCK_TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    language: str  # "sh" or "python"
    kind: str  # one of KINDS
    text: str

    def __str__(self) -> str:
        return f"README.md line {self.line} ({self.language}, {self.kind})"


def readme_blocks(text: str) -> list[Block]:
    """The shell and Python blocks of a Markdown text, each with the marker before it."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        language = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}.get(opened[1])
        if language is not None:
            marker = _MARKER.match(lines[i - 1]) if i > 0 else None
            kind = marker[1] if marker else "run"
            if kind not in KINDS:
                raise ValueError(
                    f"README.md line {i}: unknown readme-test marker {kind!r} (one of {sorted(KINDS)})"
                )
            blocks.append(Block(i + 1, language, kind, "\n".join(lines[i + 1 : end]) + "\n"))
        i = end + 1
    return blocks


def check_syntax(block: Block) -> None:
    if block.language == "python":
        compile(block.text, str(block), "exec")
        return
    checked = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, f"{block}: {checked.stderr}"


class ReadmeBroker:
    """The broker of ``make run`` on free ports, in the reader's working directory."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.kafka, self.http = free_port(), free_port()
        args = [".venv/bin/logtrove", "serve", "--data", "./data", "--listen", f"127.0.0.1:{self.kafka}"]
        args += ["--http", f"127.0.0.1:{self.http}"]
        self.log = (work / "broker.log").open("wb")
        self.process = subprocess.Popen(args, cwd=work, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not (self._accepts(self.kafka) and self._accepts(self.http)):
            assert self.process.poll() is None, (work / "broker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the broker did not start within 60 s"
            time.sleep(0.2)

    @staticmethod
    def _accepts(port: int) -> bool:
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex(("127.0.0.1", port)) == 0

    def ports(self, text: str) -> str:
        return text.replace(":9092", f":{self.kafka}").replace(":8080", f":{self.http}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.log.close()


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh working directory with the venv linked in, and an environment without the
    venv activated or a data directory chosen."""
    work = tmp_path / "reader"
    work.mkdir()
    (work / ".venv").symlink_to(VENV)
    drop = {
        "VIRTUAL_ENV",
        "LOGTROVE_DATA",
        "LOGTROVE_CLIENT_CONFIG",
        "PYSPARK_PYTHON",
        "PYSPARK_DRIVER_PYTHON",
    }
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(VENV))
    )
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    yield work, env


def run_readme(work: Path, env: dict[str, str], *, with_slow: bool, readme: Path = README) -> None:
    broker: ReadmeBroker | None = None
    try:
        for block in readme_blocks(readme.read_text()):
            check_syntax(block)
            if block.kind == "broker":
                assert broker is None, f"{block}: the broker is already running"
                broker = ReadmeBroker(work, env)
                continue
            if block.kind == "syntax-only" or (block.kind == "slow" and not with_slow):
                continue
            text = broker.ports(block.text) if broker else block.text
            command = ["bash", "-euo", "pipefail", "-c", text]
            if block.language == "python":
                command = [".venv/bin/python", "-c", text]
            done = subprocess.run(
                command,
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=SLOW_BLOCK_TIMEOUT_S if block.kind == "slow" else BLOCK_TIMEOUT_S,
                check=False,
            )
            assert done.returncode == 0, (
                f"{block} failed:\n{text}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
            )
    finally:
        if broker is not None:
            broker.stop()


def test_every_block_is_valid_and_marked_with_a_known_kind() -> None:
    blocks = readme_blocks(README.read_text())
    assert len(blocks) >= 10
    assert [b.kind for b in blocks].count("broker") == 1, "the README starts the broker once (make run)"
    for block in blocks:
        check_syntax(block)


def test_a_failing_block_fails_the_harness(reader: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    text = "# t\n\n```sh\ntrue\n```\n\n<!-- readme-test: syntax-only -->\n```sh\nfalse\n```\n\n```python\nraise SystemExit(3)\n```\n"
    blocks = readme_blocks(text)
    assert [(b.line, b.kind) for b in blocks] == [(3, "run"), (8, "syntax-only"), (12, "run")]
    (tmp_path / "README.md").write_text(text)
    with pytest.raises(AssertionError, match=re.escape("README.md line 12 (python, run) failed")):
        run_readme(*reader, with_slow=False, readme=tmp_path / "README.md")
    with pytest.raises(ValueError, match="unknown readme-test marker"):
        readme_blocks("<!-- readme-test: sometimes -->\n```sh\ntrue\n```\n")


@pytest.mark.slow  # every example, Spark jobs included: minutes on a shared machine
@pytest.mark.timeout(1800)
def test_the_readme_runs_top_to_bottom(reader: tuple[Path, dict[str, str]]) -> None:
    run_readme(*reader, with_slow=True)
