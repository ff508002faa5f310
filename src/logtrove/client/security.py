"""TLS and SASL for the client (:class:`~logtrove.client.kafka.KafkaClient`).

The settings are librdkafka's property names (what kcat and confluent-kafka users
already write), read from a properties file, one ``name=value`` a line, ``#`` comments::

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.username=alice
    sasl.password=...
    ssl.ca.location=./certs/ca.pem
    # ssl.certificate.location / ssl.key.location for a client certificate (mTLS)

The CLI takes the file from ``LOGTROVE_CLIENT_CONFIG``, so a password is never an
argument that ``ps`` shows. SASL is SaslHandshake v1 then SaslAuthenticate v2 with PLAIN
or SCRAM (``scramp``'s client).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from scramp import ScramClient, ScramException

from logtrove.client.errors import ClientConfigError, KafkaProtocolError, check
from logtrove.wire import ApiKey, SecurityProtocol

KNOWN = {
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class Requester(Protocol):
    """A connection that sends one request and returns its decoded answer."""

    def request(self, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> Any: ...


@dataclass(frozen=True)
class ClientSecurity:
    """How the client connects: TLS (with a CA and optionally a certificate) and SASL."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a log line or a traceback
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None

    @classmethod
    def from_properties(cls, text: str) -> ClientSecurity:
        props: dict[str, str] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, value = line.partition("=")
            name = name.strip()
            if not sep or name not in KNOWN:
                raise ClientConfigError(
                    f"line {number}: expected one of {', '.join(sorted(KNOWN))} as NAME=VALUE"
                )
            props[name] = value.strip()
        return cls.from_settings(props)

    @classmethod
    def from_settings(cls, props: Mapping[str, str]) -> ClientSecurity:
        """The settings of ``props``, librdkafka's property names (those of :data:`KNOWN`;
        others are refused); :class:`ClientConfigError` for a value that cannot be."""
        unknown = sorted(set(props) - KNOWN)
        if unknown:
            raise ClientConfigError(
                f"unknown setting(s) {', '.join(unknown)}: expected {', '.join(sorted(KNOWN))}"
            )
        try:
            protocol = SecurityProtocol(props.get("security.protocol", "PLAINTEXT").upper())
        except ValueError:
            raise ClientConfigError(f"unknown security.protocol {props['security.protocol']!r}") from None
        mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "PLAIN")).upper()
        if mechanism not in MECHANISMS:
            raise ClientConfigError(
                f"sasl.mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}"
            )
        security = cls(
            protocol,
            mechanism,
            props.get("sasl.username"),
            props.get("sasl.password"),
            props.get("ssl.ca.location"),
            props.get("ssl.certificate.location"),
            props.get("ssl.key.location"),
        )
        if protocol.sasl and (not security.username or security.password is None):
            raise ClientConfigError(f"{protocol.value} needs sasl.username and sasl.password")
        return security

    def properties(self) -> dict[str, str]:
        """These settings as librdkafka's properties (a confluent-kafka client's config)."""
        out = {"security.protocol": self.protocol.value}
        if self.protocol.sasl:
            assert self.username is not None and self.password is not None
            out |= {
                "sasl.mechanism": self.mechanism,
                "sasl.username": self.username,
                "sasl.password": self.password,
            }
        named = {
            "ssl.ca.location": self.cafile,
            "ssl.certificate.location": self.certfile,
            "ssl.key.location": self.keyfile,
        }
        return out | {name: value for name, value in named.items() if value}

    @classmethod
    def load(cls, path: Path) -> ClientSecurity:
        try:
            return cls.from_properties(path.read_text("utf-8"))
        except OSError as exc:
            raise ClientConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc

    def context(self) -> ssl.SSLContext:
        """The TLS context: the server's certificate checked against ``ssl.ca.location``
        (the system's CAs without it) and its name; our certificate when one is set.
        Raises :class:`ClientConfigError` for a file that cannot be read or used, so a
        long-running client (the mirror) can check its settings once at start."""
        try:
            context = ssl.create_default_context(cafile=self.cafile)
        except OSError as exc:  # ssl.SSLError included: not a PEM certificate
            raise ClientConfigError(f"ssl.ca.location {self.cafile}: {exc.strerror or exc}") from exc
        if self.certfile:
            try:
                context.load_cert_chain(self.certfile, self.keyfile)
            except OSError as exc:  # ssl.SSLError included: a key that does not match
                raise ClientConfigError(
                    f"ssl.certificate.location {self.certfile} / ssl.key.location {self.keyfile}: "
                    f"{exc.strerror or exc}"
                ) from exc
        return context

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """``sock`` under TLS when the protocol says so (the server's name checked)."""
        if not self.protocol.tls:
            return sock
        return self.context().wrap_socket(sock, server_hostname=host)

    def authenticate(self, client: Requester) -> None:
        """SASL over ``client``'s connection, when the protocol says so; raises
        :class:`~logtrove.client.errors.KafkaProtocolError` when refused."""
        if not self.protocol.sasl:
            return
        assert self.username is not None and self.password is not None
        resp = client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": self.mechanism})
        check(resp.error_code, None, f"SASL handshake ({self.mechanism})")

        def step(token: bytes) -> bytes:
            answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
            check(answer.error_code, answer.error_message, "SASL authentication")
            return bytes(answer.auth_bytes)

        if self.mechanism == "PLAIN":
            step(b"\0" + self.username.encode() + b"\0" + self.password.encode())
            return
        scram = ScramClient([self.mechanism], self.username, self.password)
        try:
            scram.set_server_first(step(scram.get_client_first().encode()).decode())
            scram.set_server_final(step(scram.get_client_final().encode()).decode())
        except (ScramException, UnicodeDecodeError) as exc:
            raise KafkaProtocolError(
                f"SASL authentication: the broker's SCRAM answer is wrong: {exc}"
            ) from exc


__all__ = ["ClientConfigError", "ClientSecurity", "Requester"]
