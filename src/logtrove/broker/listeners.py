"""Listeners as Kafka names them, and their TLS.

A listener is ``PROTOCOL://HOST:PORT`` where the protocol is one of Kafka's security
protocols: ``PLAINTEXT`` (no TLS, no authentication), ``SSL`` (TLS; the principal is the
client certificate's subject, or ``User:ANONYMOUS`` without one), ``SASL_PLAINTEXT``
(SASL, no TLS) and ``SASL_SSL`` (SASL over TLS). A bare ``HOST:PORT`` is ``PLAINTEXT``.
As in Kafka without ``listener.security.protocol.map``, a listener's name is its
protocol, so each protocol is listened on at most once; Metadata, FindCoordinator and
DescribeCluster answer with the advertised endpoint of the listener the client came
through (Kafka matches listeners by name).

TLS uses Python's :mod:`ssl`: one server context over ``--ssl-certfile`` /
``--ssl-keyfile``, trusting ``--ssl-cafile`` for client certificates, which are not
asked for (``none``), asked for but optional (``requested``) or needed (``required``),
Kafka's ``ssl.client.auth``. As in Kafka (KIP-684), that setting is for SSL listeners:
SASL_SSL listeners authenticate by SASL and ask for no client certificate.
"""

from __future__ import annotations

import enum
import ssl
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from logtrove.acl import ANONYMOUS
from logtrove.clock import ascii_int
from logtrove.wire import SecurityProtocol


class ListenerError(ValueError):
    """A listener or TLS setting that cannot be used; the message says why."""


class ClientAuth(enum.Enum):
    """Kafka's ``ssl.client.auth``: whether TLS clients are asked for a certificate."""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


@dataclass(frozen=True)
class Listener:
    """One address the broker listens on, its protocol, and what clients are told
    (``advertised_*``; ``None``: the bound host and port)."""

    protocol: SecurityProtocol
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None

    @property
    def name(self) -> str:
        return self.protocol.value

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


@dataclass(frozen=True)
class TlsSettings:
    """What the TLS listeners serve with (paths to PEM files)."""

    certfile: Path
    keyfile: Path | None = None
    cafile: Path | None = None
    client_auth: ClientAuth = ClientAuth.NONE


def parse_listener(text: str) -> Listener:
    """``PROTOCOL://HOST:PORT`` or ``HOST:PORT`` (PLAINTEXT); an empty host is 127.0.0.1
    and an IPv6 host is written in brackets, ``SSL://[::1]:9093``."""
    scheme, sep, address = text.partition("://")
    if not sep:
        scheme, address = "PLAINTEXT", text
    try:
        protocol = SecurityProtocol(scheme.upper())
    except ValueError:
        names = ", ".join(p.value for p in SecurityProtocol)
        raise ListenerError(f"unknown listener protocol {scheme!r} in {text!r} (one of {names})") from None
    host, sep, port = address.rpartition(":")
    number = ascii_int(port)
    if not sep or number is None or not 0 <= number <= 65535:
        raise ListenerError(f"a listener needs [PROTOCOL://]HOST:PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return Listener(protocol, host or "127.0.0.1", number)


def with_advertised(listeners: list[Listener], advertised: list[str]) -> list[Listener]:
    """``listeners`` with the endpoints of ``--advertise`` values applied, matched by
    protocol (a bare ``HOST:PORT`` names the PLAINTEXT listener, or the only one)."""
    out = list(listeners)
    for text in advertised:
        ad = parse_listener(text)
        by_name = [i for i, li in enumerate(out) if li.protocol is ad.protocol]
        if not by_name and "://" not in text and len(out) == 1:
            by_name = [0]
        if not by_name:
            raise ListenerError(f"--advertise {text!r} names no listener (listening on {_names(out)})")
        i = by_name[0]
        out[i] = replace(out[i], advertised_host=ad.host, advertised_port=ad.port)
    return out


def check_listeners(listeners: list[Listener], tls: TlsSettings | None) -> None:
    """Refuse two listeners of one protocol, and a TLS listener without a certificate."""
    seen: set[SecurityProtocol] = set()
    for listener in listeners:
        if listener.protocol in seen:
            raise ListenerError(
                f"two {listener.name} listeners: each protocol is listened on at most once ({_names(listeners)})"
            )
        seen.add(listener.protocol)
        if listener.protocol.tls and tls is None:
            raise ListenerError(f"listener {listener} needs --ssl-certfile (and --ssl-keyfile)")


def server_context(tls: TlsSettings, protocol: SecurityProtocol = SecurityProtocol.SSL) -> ssl.SSLContext:
    """A TLS 1.2+ server context for a listener of ``protocol`` (client certificates are
    asked for on SSL only); raises :class:`ListenerError` on unreadable files."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.certfile, tls.keyfile)
        if tls.cafile is not None:
            context.load_verify_locations(cafile=tls.cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ListenerError(f"cannot load the TLS certificate, key or CA: {exc}") from exc
    if tls.client_auth is not ClientAuth.NONE and tls.cafile is None:
        raise ListenerError(f"--ssl-client-auth {tls.client_auth.value} needs --ssl-cafile")
    if protocol is not SecurityProtocol.SSL:
        return context
    context.verify_mode = {
        ClientAuth.NONE: ssl.CERT_NONE,
        ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
        ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
    }[tls.client_auth]
    return context


# RFC 4514 short names of the attributes Python's ssl reports by their long names
_SHORT = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "domainComponent": "DC",
    "userId": "UID",
    "streetAddress": "STREET",
}


def principal_of_certificate(peercert: dict[str, Any] | None) -> str:
    """The principal of a verified client certificate as Kafka's default
    ``DefaultKafkaPrincipalBuilder`` makes it: ``User:`` and the subject's distinguished
    name in RFC 2253 order (most specific first, ``User:CN=client,O=Org,C=FR``);
    ``User:ANONYMOUS`` without a certificate."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    parts = []
    for rdn in reversed(peercert["subject"]):
        parts.append("+".join(f"{_SHORT.get(key, key)}={_escape(value)}" for key, value in rdn))
    return "User:" + ",".join(parts)


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out


def _names(listeners: list[Listener]) -> str:
    return ", ".join(str(li) for li in listeners)


__all__ = [
    "ANONYMOUS",
    "ClientAuth",
    "Listener",
    "ListenerError",
    "SecurityProtocol",
    "TlsSettings",
    "check_listeners",
    "parse_listener",
    "principal_of_certificate",
    "server_context",
    "with_advertised",
]
