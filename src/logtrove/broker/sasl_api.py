"""SaslHandshake (17) and SaslAuthenticate (36): the handlers over the session states and
token exchange of :mod:`.sasl`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from logtrove.broker.access import no_acl
from logtrove.broker.context import serves
from logtrove.broker.sasl import (
    MECHANISMS,
    SaslAuthenticationError,
    SaslState,
    authenticate_step,
    new_exchange,
)
from logtrove.wire import ApiKey

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request


_BEFORE_PRINCIPAL = "the SASL exchange establishes the principal that ACLs name"


@serves(ApiKey.SASL_HANDSHAKE, 0, 1, access=no_acl(_BEFORE_PRINCIPAL))
async def handle_sasl_handshake(broker: BrokerContext, request: Request) -> Reply:
    session = request.session
    mechanism = str(request.body.mechanism)
    if not session.listener.protocol.sasl or session.state is not SaslState.HANDSHAKE:
        # Kafka's KafkaApis answers a handshake it did not expect (PLAINTEXT/SSL, or an
        # authenticated connection without re-authentication) this way; a second
        # handshake before authentication ends the connection
        session.close_after_reply = not session.authenticated
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
    if mechanism not in MECHANISMS:
        session.close_after_reply = True
        return {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": list(MECHANISMS)}
    session.mechanism = mechanism
    session.exchange = new_exchange(mechanism, broker.credentials)
    session.state = SaslState.AUTHENTICATE
    session.raw_tokens = request.version == 0
    return {"error_code": ErrorCode.none, "mechanisms": list(MECHANISMS)}


@serves(ApiKey.SASL_AUTHENTICATE, 0, 2, access=no_acl(_BEFORE_PRINCIPAL))
async def handle_sasl_authenticate(broker: BrokerContext, request: Request) -> Reply:
    session = request.session
    if session.state is not SaslState.AUTHENTICATE or session.raw_tokens:
        if session.state is not SaslState.AUTHENTICATED:
            session.close_after_reply = True
        return _auth_reply(
            ErrorCode.illegal_sasl_state, "SaslAuthenticate request received in an unexpected state", b""
        )
    try:
        token = await authenticate_step(session, bytes(request.body.auth_bytes))
    except SaslAuthenticationError as exc:
        return _auth_reply(ErrorCode.sasl_authentication_failed, str(exc), b"")
    return _auth_reply(ErrorCode.none, None, token)


def _auth_reply(code: int, message: str | None, token: bytes) -> dict[str, object]:
    return {
        "error_code": code,
        "error_message": message,
        "auth_bytes": token,
        "session_lifetime_ms": 0,  # no re-authentication required (connections.max.reauth.ms 0)
    }
