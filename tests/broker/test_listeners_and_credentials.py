"""Listener parsing, certificate principals, and the SCRAM credentials file, without a
broker; and ``logtrove serve``'s refusals of listener settings it cannot use."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from scramp import ScramClient, ScramMechanism

from logtrove.acl.credentials import CredentialError, CredentialStore, ScramCredential
from logtrove.broker.listeners import (
    ListenerError,
    SecurityProtocol,
    parse_listener,
    principal_of_certificate,
    with_advertised,
)
from logtrove.testing import SERVE, free_port


def test_listeners_parse_as_kafka_writes_them() -> None:
    assert parse_listener("127.0.0.1:9092").protocol is SecurityProtocol.PLAINTEXT
    li = parse_listener("SASL_SSL://0.0.0.0:9094")
    assert (li.protocol, li.host, li.port) == (SecurityProtocol.SASL_SSL, "0.0.0.0", 9094)
    assert parse_listener("ssl://[::1]:9093").host == "::1"
    assert parse_listener("SASL_PLAINTEXT://:9095").host == "127.0.0.1"
    for bad in ("HTTP://a:1", "SSL://a", "a:99999", "SSL://a:x"):
        with pytest.raises(ListenerError):
            parse_listener(bad)


def test_advertised_endpoints_apply_to_the_listener_of_their_protocol() -> None:
    listeners = [parse_listener("127.0.0.1:9092"), parse_listener("SASL_SSL://0.0.0.0:9094")]
    out = with_advertised(listeners, ["SASL_SSL://broker.example:19094", "plain.example:19092"])
    assert [(li.advertised_host, li.advertised_port) for li in out] == [
        ("plain.example", 19092),
        ("broker.example", 19094),
    ]
    with pytest.raises(ListenerError, match="names no listener"):
        with_advertised(listeners, ["SSL://x:1"])


def test_a_certificate_subject_is_the_principal_in_rfc2253_order() -> None:
    cert = {
        "subject": (
            (("countryName", "FR"),),
            (("organizationName", "Acme, Inc"),),
            (("commonName", "app-one"),),
        )
    }
    assert principal_of_certificate(cert) == "User:CN=app-one,O=Acme\\, Inc,C=FR"
    assert principal_of_certificate(None) == "User:ANONYMOUS"
    assert principal_of_certificate({}) == "User:ANONYMOUS"


def test_stored_credentials_are_those_rfc5802_derives(tmp_path: Path) -> None:
    """Our stored and server keys equal scramp's for the same salt and iterations, so a
    SCRAM client proves the password the credential was made from, and PLAIN agrees."""
    salt = b"0123456789abcdef"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        ours = ScramCredential.from_password(mechanism, "pässword", 4096, salt)
        theirs = ScramMechanism(mechanism).make_auth_info("pässword", iteration_count=4096, salt=salt)
        assert (ours.salt, ours.stored_key, ours.server_key, ours.iterations) == theirs
        assert ours.matches(mechanism, "pässword")
        assert not ours.matches(mechanism, "password")


def test_the_credentials_file_holds_no_password_and_is_private(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path)
    cred = ScramCredential.from_password("SCRAM-SHA-512", "hunter2-hunter2")
    store.update(lambda users: users.setdefault("alice", {}).update({"SCRAM-SHA-512": cred}))
    raw = store.path.read_bytes()
    assert b"hunter2" not in raw
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert json.loads(raw)["users"]["alice"]["SCRAM-SHA-512"]["iterations"] == cred.iterations
    # another store over the same directory (another process) sees it, and PLAIN checks against it
    other = CredentialStore(tmp_path)
    assert other.check_password("alice", "hunter2-hunter2")
    assert not other.check_password("alice", "wrong")
    assert not other.check_password("nobody", "hunter2-hunter2")
    # a full SCRAM exchange against the stored keys
    client = ScramClient(["SCRAM-SHA-512"], "alice", "hunter2-hunter2")
    stored = other.get("alice", "SCRAM-SHA-512")
    assert stored is not None
    server = ScramMechanism("SCRAM-SHA-512").make_server(
        lambda user: (stored.salt, stored.stored_key, stored.server_key, stored.iterations)
    )
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    server.set_client_final(client.get_client_final())
    client.set_server_final(server.get_server_final())


def test_a_damaged_credentials_file_is_an_error_not_an_empty_user_list(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path)
    store.path.write_text('{"format": 1, "users": {"alice": {"SCRAM-SHA-512": {"salt": "!!"}}}}')
    with pytest.raises(CredentialError):
        store.users()


def _serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SERVE, "serve", "--data", str(tmp_path / "d"), "--no-http", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_refuses_listener_settings_it_cannot_use(tmp_path: Path) -> None:
    port = free_port()
    out = _serve(tmp_path, "--listen", f"SSL://127.0.0.1:{port}")
    assert out.returncode == 2
    assert "needs --ssl-certfile" in out.stderr
    out = _serve(tmp_path, "--listen", f"127.0.0.1:{port}", "--listen", f"PLAINTEXT://127.0.0.1:{port + 1}")
    assert out.returncode == 2
    assert "two PLAINTEXT listeners" in out.stderr
    out = _serve(tmp_path, "--listen", f"KERBEROS://127.0.0.1:{port}")
    assert out.returncode == 2
    assert "unknown listener protocol" in out.stderr
    out = _serve(
        tmp_path, "--listen", f"SSL://127.0.0.1:{port}", "--ssl-certfile", str(tmp_path / "missing.pem")
    )
    assert out.returncode == 2
    assert "cannot load the TLS certificate" in out.stderr
    assert not (tmp_path / "d").exists()  # refused before the data directory is made
