"""A real ``logtrove serve`` subprocess on a free 127.0.0.1 port, started and stopped by
its PID: the one broker harness of the tests (Kafka only, or with its HTTP API), and
``logtrove`` commands run as another machine would run them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Self

SERVE = "from logtrove.cli.main import main; main()"
# How long a started broker may take to answer. It is a bound on a wait, not a measure:
# a broker that exits is reported at once, and on a busy machine (parallel test workers,
# other users) importing logtrove in a fresh interpreter alone can take tens of seconds.
START_TIMEOUT_S = 120


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli_in(
    cwd: Path, *args: str, timeout: float = 180, input_: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``logtrove ARGS`` run from ``cwd`` without LOGTROVE_* settings: from a directory
    with no data directory in it, that is another machine as far as the CLI can tell.
    ``input_`` is its standard input."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGTROVE_")}
    return subprocess.run(
        [sys.executable, "-c", SERVE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        input=input_,
        cwd=cwd,
        env=env,
    )


class BrokerProcess:
    """One broker subprocess over a data directory; restartable on the same port. Its
    output goes to ``log`` (beside the data directory). ``preexec`` runs in the child
    before it starts (e.g. to lower ``ulimit -n``)."""

    preexec: Callable[[], None] | None = None
    start_timeout_s: float = START_TIMEOUT_S

    def __init__(self, data: Path, port: int, *extra: str) -> None:
        self.data = data
        self.port = port
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data.parent / f"broker-{port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def http_args(self) -> list[str]:
        return ["--no-http"]

    def ready(self) -> bool:
        """Whether the started broker answers (here: accepts Kafka connections)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
            return True

    def start(self) -> None:
        args = [sys.executable, "-c", SERVE, "serve", "--data", str(self.data), "--listen", self.bootstrap]
        args += ["--initial-rebalance-delay-ms", "200", *self.http_args(), *self.extra]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=self.preexec)  # noqa: PLW1509
        try:
            self._wait_ready()
        except BaseException:
            # A start that fails (or is interrupted) ends its process: the caller's
            # ``with`` never reaches __exit__, and a broker left running holds a port, a
            # data directory and CPU for the rest of the session.
            self.stop(signal.SIGKILL)
            raise

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited: {self.log.read_text()}")
            try:
                if self.ready():
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"broker did not start in {self.start_timeout_s:.0f} s: {self.log.read_text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int | None:
        """Signal the broker (by its PID) and wait; SIGKILL after ``timeout``. Returns
        its exit code (``None`` if it was not running)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait(10)
        self.proc = None
        return code

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HttpBrokerProcess(BrokerProcess):
    """A broker subprocess that also serves its HTTP API on ``http_port``; started when
    the API answers its health check."""

    def __init__(self, data: Path, port: int, http_port: int, *extra: str) -> None:
        super().__init__(data, port, *extra)
        self.http_port = http_port

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def http_args(self) -> list[str]:
        return ["--http", f"127.0.0.1:{self.http_port}"]

    def ready(self) -> bool:
        with urllib.request.urlopen(f"{self.http}/api/v1/health", timeout=1) as answer:
            return bool(answer.status == 200)

    def http_ready(self) -> bool:
        """Whether the HTTP API answers its health check now."""
        try:
            return HttpBrokerProcess.ready(self)
        except OSError:
            return False
