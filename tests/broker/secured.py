"""One broker listening on PLAINTEXT, SASL_SSL, SASL_PLAINTEXT and SSL (client
certificate required) at once, with certificates made by ``logtrove certs`` and user
``alice`` by ``logtrove users``: the ``secured`` fixture of the security and mirror tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from logtrove.testing import SERVE, BrokerProcess, free_port

PASSWORD = "alice-secret"


def logtrove(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SERVE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@dataclass
class Secured:
    broker: BrokerProcess
    certs: Path
    data: Path
    sasl_ssl: int
    sasl_plain: int
    ssl: int

    def sasl_ssl_conf(self, user: str = "alice", password: str = PASSWORD) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_ssl}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(self.certs / "ca.pem"),
        }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("secured")
    certs, data = root / "certs", root / "data"
    made = logtrove("certs", "--out", str(certs), "--client", "app-one")
    assert made.returncode == 0, made.stderr
    added = logtrove("users", "add", "alice", "--data", str(data), "--password-stdin", stdin=PASSWORD + "\n")
    assert added.returncode == 0, added.stderr
    ports = [free_port() for _ in range(3)]
    extra = [
        *("--listen", f"SASL_SSL://127.0.0.1:{ports[0]}"),
        *("--listen", f"SASL_PLAINTEXT://127.0.0.1:{ports[1]}"),
        *("--listen", f"SSL://127.0.0.1:{ports[2]}"),
        *("--ssl-certfile", str(certs / "server.pem"), "--ssl-keyfile", str(certs / "server.key")),
        *("--ssl-cafile", str(certs / "ca.pem"), "--ssl-client-auth", "required"),
    ]
    with BrokerProcess(data, free_port(), *extra) as broker:
        yield Secured(broker, certs, data, *ports)
