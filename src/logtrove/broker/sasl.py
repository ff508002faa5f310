"""SASL authentication as Kafka's ``SaslServerAuthenticator`` does it: the session
states, the mechanisms and the token exchange; the SaslHandshake (17) and
SaslAuthenticate (36) handlers are in :mod:`.sasl_api`.

A connection to a SASL listener goes through these states (:class:`Session`)::

    HANDSHAKE --SaslHandshake(mechanism ok)--> AUTHENTICATE --last token ok--> AUTHENTICATED
        |  ApiVersions answered                     |  wrong credentials: error 58, close
        +-- any other API: connection closed        +-- any other API: connection closed

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are served;
any other request closes the connection without an answer, as Kafka does ("Unexpected
Kafka request of type X during SASL handshake"). After SaslHandshake v0 the tokens come
as bare size-prefixed frames, without a Kafka request header (:attr:`Session.raw_tokens`);
after v1 they come in SaslAuthenticate requests. A frame before authentication is at most
``MAX_UNAUTHENTICATED_FRAME`` bytes (Kafka's ``sasl.server.max.receive.size``), a SASL
token at most ``MAX_TOKEN_BYTES`` (longer ones fail authentication), and the whole
exchange must end within the broker's ``sasl_auth_timeout_ms``.

Mechanisms: PLAIN (RFC 4616; checked against the user's SCRAM credential) and
SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 / 7677, by the ``scramp`` library against the
stored keys of :mod:`logtrove.acl.credentials`). A failure answers SASL_AUTHENTICATION_FAILED (58)
with a message after ``FAILED_AUTH_DELAY_S`` (Kafka's
``connection.failed.authentication.delay.ms``, which slows password guessing), then
closes the connection.

Re-authentication (KIP-368) is refused as Kafka refuses it when
``connections.max.reauth.ms`` is 0, its default: SaslAuthenticate answers
``session_lifetime_ms = 0`` (no re-authentication required), and a SaslHandshake or
SaslAuthenticate on an authenticated connection answers ILLEGAL_SASL_STATE (34).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass
from typing import Protocol

from scramp import ScramException, ScramMechanism
from scramp.core import Nonce  # type: ignore[import-untyped]

from logtrove.acl.credentials import SCRAM_MECHANISMS, CredentialError, CredentialStore
from logtrove.broker.listeners import Listener
from logtrove.wire import ApiKey

log = logging.getLogger("logtrove.broker")

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
MAX_UNAUTHENTICATED_FRAME = 512 * 1024  # Kafka's sasl.server.max.receive.size
MAX_TOKEN_BYTES = 8192  # a PLAIN or SCRAM message is a few hundred bytes
FAILED_AUTH_DELAY_S = 0.1  # Kafka's connection.failed.authentication.delay.ms (100)
PRE_AUTH_KEYS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class SaslState(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "exchanging SASL tokens"
    AUTHENTICATED = "authenticated"


class SaslAuthenticationError(Exception):
    """The client's credentials or tokens were refused; the message goes to the client."""


class Exchange(Protocol):
    """One mechanism's server side: each client token in, a server token out."""

    done: bool
    user: str | None

    async def step(self, token: bytes) -> bytes: ...


@dataclass(slots=True, eq=False)
class Session:
    """What the broker knows about one connection: the listener it came through, the
    principal (``User:NAME``), and, on SASL listeners, where authentication stands."""

    listener: Listener
    principal: str
    state: SaslState
    exchange: Exchange | None = None
    mechanism: str | None = None
    raw_tokens: bool = False  # after SaslHandshake v0: tokens as bare frames
    close_after_reply: bool = False
    address: str = ""  # the client's address (ACL hosts)

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.AUTHENTICATED


def new_exchange(mechanism: str, store: CredentialStore) -> Exchange:
    if mechanism == "PLAIN":
        return PlainExchange(store)
    return ScramExchange(mechanism, store)


class PlainExchange:
    """SASL/PLAIN (RFC 4616): one token ``[authzid] NUL user NUL password``."""

    def __init__(self, store: CredentialStore) -> None:
        self.store = store
        self.done = False
        self.user: str | None = None

    async def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user or not password:
            raise SaslAuthenticationError("Authentication failed: username and password must not be empty")
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        # PBKDF2 takes milliseconds: off the event loop, which serves every connection
        loop = asyncio.get_running_loop()
        try:
            matches = await loop.run_in_executor(None, self.store.check_password, user, password)
        except CredentialError as exc:
            log.error("cannot check a password: %s", exc)
            raise SaslAuthenticationError(
                "Authentication failed: the broker cannot read its credentials"
            ) from None
        if not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        self.done, self.user = True, user
        return b""


class ScramExchange:
    """SCRAM (RFC 5802): client-first → server-first, client-final → server-final.
    Kafka's failure message names the mechanism and nothing else, whether the user is
    unknown or the proof wrong."""

    def __init__(self, mechanism: str, store: CredentialStore) -> None:
        self.mechanism = mechanism
        self.store = store
        self.server = ScramMechanism(mechanism).make_server(self._auth_info)
        self.done = False
        self.user: str | None = None
        self._first = True
        self._name: str | None = None

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int] | None:
        self._name = user
        cred = self.store.get(user, self.mechanism)
        if cred is None:
            return None
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    async def step(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
            if self._first:
                self._first = False
                self.server.set_client_first(message)
                return str(self.server.get_server_first()).encode()
            self._allow_repeated_client_nonce(message)
            self.server.set_client_final(message)
            final = str(self.server.get_server_final())
        except (ScramException, UnicodeDecodeError, CredentialError, ValueError) as exc:
            log.info("SCRAM authentication failed: %s", exc)
            raise SaslAuthenticationError(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                + self.mechanism
            ) from None
        self.done, self.user = True, self._name
        return final.encode()

    def _allow_repeated_client_nonce(self, client_final: str) -> None:
        """Accept the nonce of librdkafka before 2.6.1 (Debian's kcat 1.7.1 links 2.0.2).

        RFC 5802 has the client echo the server's combined nonce, ``r=<client><server>``;
        those librdkafka versions put their own nonce in front of it once more,
        ``r=<client><client><server>``, and compute the proof over the message as sent, so
        the proof checks out as usual. Only that one form is let through the nonce
        comparison, and only with the client nonce of this exchange. (Apache Kafka 3.8.1
        to 3.9 accept any nonce that ends with the combined one; 4.x only the exact one,
        which refuses these clients.)
        """
        combined = str(self.server.nonce)
        client = combined[: len(combined) - len(str(self.server.s_nonce))]
        sent = next((part[2:] for part in client_final.split(",") if part.startswith("r=")), None)
        if client and sent == client + combined:
            self.server.nonce = Nonce(sent)


async def authenticate_step(session: Session, token: bytes) -> bytes:
    """One client token through the session's exchange; on the last, the session is
    authenticated. A failure marks the connection to close after its answer, which is
    delayed by ``FAILED_AUTH_DELAY_S``."""
    assert session.exchange is not None
    try:
        if len(token) > MAX_TOKEN_BYTES:
            raise SaslAuthenticationError(
                f"Authentication failed: a SASL token of {len(token)} bytes is over the limit of {MAX_TOKEN_BYTES}"
            )
        reply = await session.exchange.step(token)
    except SaslAuthenticationError as exc:
        session.close_after_reply = True
        log.info("authentication failed on %s (%s): %s", session.listener, session.mechanism, exc)
        await asyncio.sleep(FAILED_AUTH_DELAY_S)
        raise
    if session.exchange.done:
        session.principal = f"User:{session.exchange.user}"
        session.state = SaslState.AUTHENTICATED
        session.exchange = None
    return reply


__all__ = [
    "MAX_UNAUTHENTICATED_FRAME",
    "MECHANISMS",
    "PRE_AUTH_KEYS",
    "SCRAM_MECHANISMS",
    "SaslAuthenticationError",
    "SaslState",
    "Session",
    "authenticate_step",
]
