"""``logtrove users add|delete|list`` and ``logtrove certs``, offline, as a user runs them."""

from __future__ import annotations

import json
import ssl
import stat
import subprocess
import sys
from pathlib import Path

SERVE = "from logtrove.cli.main import main; main()"


def logtrove(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SERVE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_users_add_list_delete_on_a_new_data_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = logtrove("users", "add", "alice", "--data", str(data), "--password-stdin", stdin="s3cret-pw\n")
    assert out.returncode == 0, out.stderr
    out = logtrove(
        "users", "add", "bob", "-m", "SCRAM-SHA-256", "--iterations", "4096", "--data", str(data), "--password-stdin",
        stdin="other\n",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    listed = json.loads(logtrove("users", "list", "--data", str(data), "--json").stdout)
    assert listed == [
        {"user": "alice", "mechanisms": {"SCRAM-SHA-256": 8192, "SCRAM-SHA-512": 8192}},
        {"user": "bob", "mechanisms": {"SCRAM-SHA-256": 4096}},
    ]
    creds = data / "scram-credentials.json"
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600
    assert b"s3cret" not in creds.read_bytes()
    assert (data / "meta.json").is_file()  # a data directory a broker can serve
    out = logtrove("users", "delete", "bob", "--data", str(data))
    assert out.returncode == 0, out.stderr
    out = logtrove("users", "delete", "bob", "--data", str(data))
    assert out.returncode == 1
    assert "has no" in out.stderr
    out = logtrove("users", "delete", "alice", "-m", "SCRAM-SHA-256", "--data", str(data))
    assert out.returncode == 0, out.stderr
    listed = json.loads(logtrove("users", "list", "--data", str(data), "--json").stdout)
    assert listed == [{"user": "alice", "mechanisms": {"SCRAM-SHA-512": 8192}}]


def test_users_add_refuses_bad_input_without_writing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for args, stdin, message in [
        (["alice", "-m", "SCRAM-SHA-1"], "pw\n", "unknown mechanism"),
        (["alice", "--iterations", "100"], "pw\n", "iterations must be within"),
        (["bad\x01name"], "pw\n", "printable"),
        (["alice"], "\n", "must not be empty"),
    ]:
        out = logtrove("users", "add", *args, "--data", str(data), "--password-stdin", stdin=stdin)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr
    assert not (data / "scram-credentials.json").exists()
    out = logtrove("users", "list", "--data", str(tmp_path / "nothing"))
    assert out.returncode == 1
    assert "not a logtrove data directory" in out.stderr


def test_certs_makes_a_ca_a_server_and_a_client_certificate_that_verify(tmp_path: Path) -> None:
    out = logtrove(
        "certs",
        "--out",
        str(tmp_path / "c"),
        "--host",
        "broker.test",
        "--host",
        "10.1.2.3",
        "--client",
        "app",
    )
    assert out.returncode == 0, out.stderr
    c = tmp_path / "c"
    for key in ("ca.key", "server.key", "app.key"):
        assert stat.S_IMODE((c / key).stat().st_mode) == 0o600
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(c / "server.pem", c / "server.key")
    client = ssl.create_default_context(cafile=str(c / "ca.pem"))
    client.load_cert_chain(c / "app.pem", c / "app.key")
    from cryptography import x509

    cert = x509.load_pem_x509_certificate((c / "server.pem").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["broker.test"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.1.2.3"]
    again = logtrove("certs", "--out", str(c))
    assert again.returncode == 1
    assert "--force" in again.stderr
