"""``logtrove certs``: a CA, a server certificate and client certificates for trying TLS.

Everything is written to one directory as PEM files (keys mode 0600)::

    ca.pem  ca.key            the CA (give ca.pem to clients: ssl.ca.location / ssl_cafile)
    server.pem  server.key    for --ssl-certfile / --ssl-keyfile; names every --host in its SAN
    NAME.pem  NAME.key        one per --client NAME (CN=NAME): the mTLS principal User:CN=NAME

Keys are ECDSA P-256 (small and fast; every Kafka client takes them). This is for trying
logtrove and for tests: production certificates come from your own CA.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from logtrove.cli.app import app
from logtrove.cli.common import console, fail

if TYPE_CHECKING:
    from cryptography import x509

# imported inside functions: `cryptography` is needed only by this command


def _new_key() -> object:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: object) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    assert isinstance(key, ec.EllipticCurvePrivateKey)
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(data)


def _write_cert(path: Path, cert: object) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    assert isinstance(cert, x509.Certificate)
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def make_certificates(out: Path, hosts: list[str], clients: list[str], days: int) -> list[Path]:
    """Write a CA, a server certificate for ``hosts`` (DNS names or IP addresses) and one
    client certificate per name in ``clients`` into ``out``; the paths written."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = _new_key()
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "logtrove test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def issue(cn: str, usage: x509.ObjectIdentifier, san: list[x509.GeneralName]) -> tuple[object, object]:
        key = _new_key()
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    out.mkdir(parents=True, exist_ok=True)
    written = [out / "ca.pem", out / "ca.key"]
    _write_cert(written[0], ca)
    _write_key(written[1], ca_key)
    key, cert = issue(hosts[0], ExtendedKeyUsageOID.SERVER_AUTH, [_general_name(h) for h in hosts])
    written += [out / "server.pem", out / "server.key"]
    _write_cert(written[-2], cert)
    _write_key(written[-1], key)
    for name in clients:
        key, cert = issue(name, ExtendedKeyUsageOID.CLIENT_AUTH, [])
        written += [out / f"{name}.pem", out / f"{name}.key"]
        _write_cert(written[-2], cert)
        _write_key(written[-1], key)
    return written


def _general_name(host: str) -> x509.GeneralName:
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


@app.command()
def certs(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory the PEM files go to.")] = Path(
        "./certs"
    ),
    host: Annotated[
        list[str] | None,
        typer.Option("--host", help="DNS name or IP address of the server certificate; repeatable."),
    ] = None,
    client: Annotated[
        list[str] | None,
        typer.Option(
            "--client", help="Also make a client certificate with CN=NAME (NAME.pem, NAME.key); repeatable."
        ),
    ] = None,
    days: Annotated[int, typer.Option("--days", min=1, help="Validity of the certificates, days.")] = 365,
    force: Annotated[bool, typer.Option("--force", help="Overwrite certificates already in --out.")] = False,
) -> None:
    """Make a CA, a server certificate and optional client certificates for trying TLS
    (`serve --listen SASL_SSL://… --ssl-certfile server.pem --ssl-keyfile server.key`)."""
    hosts = host or ["localhost", "127.0.0.1"]
    clients = client or []
    for name in clients:
        if not name or "/" in name or name.startswith(".") or name in ("ca", "server"):
            fail(f"--client {name!r}: a name that is not ca or server and can be a file name", 2)
    if (out / "ca.pem").exists() and not force:
        fail(f"{out} already holds certificates (ca.pem); use --force to replace them", 1)
    try:
        written = make_certificates(out, hosts, clients, days)
    except OSError as exc:
        fail(f"cannot write to {out}: {exc.strerror or exc}")
    for path in written:
        console.print(str(path), highlight=False)
