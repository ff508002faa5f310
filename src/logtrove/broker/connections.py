"""The connections of every listener: frames in, requests to their handlers, replies out.

Each connection is served strictly in order, one request at a time (as Kafka does by
muting the channel): a request is read, handled, its response written, and only then is
the next frame read, so responses are always in request order and a slow client holds at
most one frame in memory (``max_frame_bytes``) plus what the transport buffers before
back-pressure (``drain``) applies. A connection whose reply is not being taken is not read
any further, and when it goes, its transport is aborted and no frame keeps its buffers:
an unsent reply is freed at once.

A frame that cannot be decoded closes only its own connection; a version the broker
does not serve gets ``UNSUPPORTED_VERSION`` for ApiVersions (answered in v0 so any
client can read it) and closes the connection for the other APIs, as Kafka does. Bytes
after a whole request in its frame are ignored, as Kafka ignores them (its
``AbstractRequest.parseRequest`` never checks that the buffer was used up, and
librdkafka's Metadata v12 carries three such bytes).

Each connection has a :class:`~logtrove.broker.sasl.Session` naming its listener and
principal, which handlers read from :attr:`Request.session`. TLS is done by the
transport (the handshake is over before the connection is served); on a SASL listener,
frames go through :meth:`Connections._handle_unauthenticated` until the session is
authenticated (see :mod:`.sasl`), and PLAINTEXT connections take the same path as before
(one attribute test per request).

The handlers get the broker's :class:`~logtrove.broker.context.BrokerContext` and nothing
of this module.
"""

from __future__ import annotations

import asyncio
import logging
from functools import cache
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from logtrove.broker.access import Guard
from logtrove.broker.apis import unsupported_api_versions
from logtrove.broker.context import BrokerContext
from logtrove.broker.frames import IN_PLACE_MAX, FrameReader
from logtrove.broker.limits import Connection, ConnectionLimits, Phase, overdue
from logtrove.broker.listeners import ANONYMOUS, Listener, SecurityProtocol, principal_of_certificate
from logtrove.broker.requests import RawBody, Reply, Request
from logtrove.broker.sasl import (
    MAX_UNAUTHENTICATED_FRAME,
    PRE_AUTH_KEYS,
    SaslAuthenticationError,
    SaslState,
    Session,
    authenticate_step,
)
from logtrove.wire import SIZE, ApiKey, build, encode, response_header
from logtrove.wire.framing import REQUEST_PREFIX
from logtrove.wire.produce import MalformedRequestError, decode_produce_request

log = logging.getLogger("logtrove.broker")

# bound once: looking a member up on the enum class costs ~50 ns, per request here
_PRODUCE, _API_VERSIONS = ApiKey.PRODUCE, ApiKey.API_VERSIONS
PRODUCE_PREFIX = int(ApiKey.PRODUCE).to_bytes(2, "big")  # a request frame's first bytes: its api key


class BadFrameError(Exception):
    """A frame that cannot be decoded or is of a version we do not serve."""


@cache
def _schemas(api_key: int, version: int) -> tuple[type, type, Any, Any]:
    req_cls = load_request_schema(api_key, version)
    resp_cls = load_response_schema(api_key, version)
    return req_cls, resp_cls, entity_reader(req_cls.__header_schema__), entity_reader(req_cls)


class Connections:
    """The open connections of one broker, and the loop that serves each.

    Limits, as Kafka's: connections over ``max_connections`` in total or
    ``max_connections_per_ip`` from one address are closed when accepted; a connection
    with no request for ``connections_max_idle_ms``, or whose reply is not taken for that
    long, is closed; a request frame that has begun must arrive whole within
    ``request_read_timeout_ms`` (a slow sender cannot hold a connection and a half-read
    frame forever). One periodic scan (:meth:`watch`) checks the timeouts (no timer per
    request). The replies not yet taken by their clients count against
    ``fetch_memory_bytes`` (``context.unsent_bytes``): past it, each Fetch gives one batch
    (so consumers still progress) until readers catch up or leave."""

    def __init__(self, context: BrokerContext, limits: ConnectionLimits) -> None:
        self.context = context
        self.config = context.config
        self.apis = context.apis
        self.limits = limits
        self._connections: dict[asyncio.Task[None], Connection] = {}

    async def close(self, timeout_s: float = 5.0) -> None:
        """Cancel every connection's task and wait up to ``timeout_s`` for them to end."""
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=timeout_s)

    def new_session(self, listener: Listener, writer: asyncio.StreamWriter, conn: Connection) -> Session:
        """A connection's session: authenticated at once unless its listener is SASL (then
        it must be within ``sasl_auth_timeout_ms``); on SSL the principal is the client
        certificate's subject."""
        principal = ANONYMOUS
        if listener.protocol is SecurityProtocol.SSL:
            principal = principal_of_certificate(writer.get_extra_info("peercert"))
            log.info("TLS connection from %s on %s as %s", conn.address, listener, principal)
        if not listener.protocol.sasl:
            return Session(listener, principal, SaslState.AUTHENTICATED, address=conn.address)
        conn.auth_deadline = conn.since + self.config.sasl_auth_timeout_ms / 1000
        return Session(listener, principal, SaslState.HANDSHAKE, address=conn.address)

    async def serve(
        self,
        listener: Listener,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        admitted: bool = False,
    ) -> None:
        """Serve one connection until it ends; ``admitted``: the limits counted it already
        (TLS listeners admit before the handshake)."""
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if peer else ""
        if not admitted and not self.limits.admit(address):
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        conn = Connection(address, writer.transport.abort, Phase.IDLE, loop.time())
        self._connections[task] = conn
        session = self.new_session(listener, writer, conn)
        try:
            while (frame := await self._read_frame(reader, conn, session)) is not None:
                conn.enter(Phase.HANDLING, loop.time())
                if session.authenticated:
                    reply = await self._handle_frame(frame, session)
                else:
                    reply = await self._handle_unauthenticated(frame, session)
                    if session.authenticated:
                        conn.auth_deadline = None
                        log.info("%s authenticated from %s on %s", session.principal, address, listener)
                del frame  # a request of up to max_frame_bytes must not outlive its handling
                if reply:
                    conn.enter(Phase.WRITING, loop.time())
                    size = sum(len(chunk) for chunk in reply)
                    self.context.unsent_bytes += size
                    try:
                        await self._send(writer, reply)
                    finally:
                        self.context.unsent_bytes -= size
                if session.close_after_reply:
                    break
                conn.enter(Phase.IDLE, loop.time())
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except BadFrameError as exc:
            log.info("closing connection from %s: %s", address, exc)
        except Exception:
            log.exception("closing connection after an internal error")
        finally:
            del self._connections[task]
            self.limits.release(address)
            if writer.transport.get_write_buffer_size():
                writer.transport.abort()  # its reader is gone or stuck: drop the unsent reply now
            else:
                writer.close()

    async def _read_frame(
        self, reader: asyncio.StreamReader, conn: Connection, session: Session
    ) -> bytes | bytearray | None:
        """The next request frame (without its size), or ``None`` at a clean end of stream.
        Its first byte ends the connection's idle phase and begins its reading phase.
        Before authentication a frame is at most ``MAX_UNAUTHENTICATED_FRAME`` bytes, and
        a bare SASL token (after SaslHandshake v0) may be shorter than a request header.

        On a plain listener (:class:`~logtrove.broker.frames.FrameReader`) a frame of up
        to ``IN_PLACE_MAX`` bytes is received in place; an authenticated Produce frame and handed on as that
        ``bytearray`` (its records become views of it); any other frame is copied to
        ``bytes`` once, as ``readexactly`` did, for decoders that want ``bytes``."""
        try:
            first = await reader.readexactly(1)
        except asyncio.IncompleteReadError:
            return None
        conn.enter(Phase.READING, asyncio.get_running_loop().time())
        (size,) = SIZE.unpack(first + await reader.readexactly(SIZE.size - 1))
        if session.authenticated:
            low, high = REQUEST_PREFIX.size, self.config.max_frame_bytes
        else:
            low, high = (0 if session.raw_tokens else REQUEST_PREFIX.size), MAX_UNAUTHENTICATED_FRAME
        if size < low or size > high:
            raise BadFrameError(f"frame size {size} out of range")
        if not isinstance(reader, FrameReader) or size > IN_PLACE_MAX:
            return await reader.readexactly(size)
        frame = await reader.readframe(size)
        # the next frame may be allocated before it arrives, within this connection's limit
        reader.ahead_max = min(IN_PLACE_MAX, high) if session.authenticated else 0
        if session.authenticated and frame[:2] == PRODUCE_PREFIX:
            return frame
        return bytes(frame)

    async def _send(self, writer: asyncio.StreamWriter, chunks: list[bytes | memoryview]) -> None:
        """Write one reply and wait until the transport has taken it down to its low-water
        mark; the connection reads no further request meanwhile. ``chunks`` is emptied in
        every case, so a failed connection's frames (kept by the exception's traceback)
        do not keep the reply's buffers alive."""
        try:
            writer.writelines(chunks)
            await writer.drain()
        finally:
            chunks.clear()

    async def watch(self) -> None:
        """Abort the connections waiting longer than their phase allows (see
        :func:`~logtrove.broker.limits.overdue`), checking a few times per shortest limit."""
        idle_s = self.config.connections_max_idle_ms / 1000
        read_s = self.config.request_read_timeout_ms / 1000
        interval = min(1.0, idle_s / 4, read_s / 4)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            for conn, why in overdue(self._connections.values(), loop.time(), idle_s=idle_s, read_s=read_s):
                log.debug("closing connection from %s: %s", conn.address, why)
                conn.abort()

    async def _handle_unauthenticated(
        self, frame: bytes | bytearray, session: Session
    ) -> list[bytes | memoryview] | None:
        """A frame of a SASL connection not yet authenticated: a bare token after
        SaslHandshake v0, else ApiVersions, SaslHandshake or SaslAuthenticate; any other
        request ends the connection, as Kafka's SaslServerAuthenticator does."""
        if session.raw_tokens:
            try:
                token = await authenticate_step(session, bytes(frame))
            except SaslAuthenticationError:
                return None  # v0 has no way to say why: the connection closes
            return [SIZE.pack(len(token)) + token]
        api_key = REQUEST_PREFIX.unpack_from(frame, 0)[0]
        if api_key not in PRE_AUTH_KEYS:
            raise BadFrameError(
                f"unexpected request (api key {api_key}) on {session.listener} before authentication"
            )
        return await self._handle_frame(frame, session)

    def _decode(self, frame: bytes | bytearray, session: Session) -> Request:
        api_key, version, correlation_id = REQUEST_PREFIX.unpack_from(frame, 0)
        api = self.apis.get(api_key)
        if api is None:
            raise BadFrameError(f"api key {api_key} is not served")
        if not api.min_version <= version <= api.max_version:
            raise BadFrameError(f"api key {api_key} version {version} is not served")
        if api_key == _PRODUCE:  # the hot path: records stay views of the frame
            try:
                produce = decode_produce_request(frame)
            except MalformedRequestError as exc:
                raise BadFrameError(f"undecodable Produce v{version}: {exc}") from exc
            resp_cls = _schemas(api_key, version)[1]
            return Request(
                api_key,
                version,
                correlation_id,
                produce.client_id,
                produce,
                version >= 9,
                resp_cls,
                session,
                self._guard(api_key, session),
            )
        try:
            req_cls, resp_cls, read_header, read_body = _schemas(api_key, version)
            header, used = read_header(frame, 0)
            body, _ = read_body(frame, used)  # bytes after the request are ignored, as Kafka does
        except (SerialError, KeyError, ValueError, UnknownEntity, UnknownAPIKey, TypeError) as exc:
            raise BadFrameError(f"undecodable request (key {api_key} v{version}): {exc!r}") from exc
        return Request(
            api_key=api_key,
            version=version,
            correlation_id=correlation_id,
            client_id=getattr(header, "client_id", None),
            body=body,
            flexible=bool(getattr(req_cls, "__flexible__", False)),
            response_cls=resp_cls,
            session=session,
            guard=self._guard(api_key, session),
        )

    def _guard(self, api_key: int, session: Session) -> Guard:
        return Guard(
            self.apis[api_key].rule, self.context.authorizer, session.principal, session.address, api_key
        )

    async def _handle_frame(
        self, frame: bytes | bytearray, session: Session
    ) -> list[bytes | memoryview] | None:
        api_key, version, correlation_id = REQUEST_PREFIX.unpack_from(frame, 0)
        if api_key == _API_VERSIONS and not self._serves(api_key, version):
            return self._frame(unsupported_api_versions(self.context), correlation_id, False, api_key)
        request = self._decode(frame, session)
        api = self.apis[request.api_key]
        reply: Reply = request.guard.before(request)  # a denied cluster operation: no handler call
        if reply is None:
            reply = await api.handler(self.context, request)
            request.guard.verify(request)
        if reply is None:
            return None
        if isinstance(reply, RawBody):
            return self._frame_chunks(reply.chunks, correlation_id, request.flexible, api_key)
        return self._frame(
            encode(build(request.response_cls, reply)), correlation_id, request.flexible, api_key
        )

    def _serves(self, api_key: int, version: int) -> bool:
        api = self.apis.get(api_key)
        return api is not None and api.min_version <= version <= api.max_version

    def _frame(
        self, body: bytes, correlation_id: int, flexible: bool, api_key: int
    ) -> list[bytes | memoryview]:
        header = response_header(correlation_id, flexible, api_key)
        return [SIZE.pack(len(header) + len(body)) + header + body]

    def _frame_chunks(
        self, chunks: list[bytes | memoryview], correlation_id: int, flexible: bool, api_key: int
    ) -> list[bytes | memoryview]:
        header = response_header(correlation_id, flexible, api_key)
        size = len(header) + sum(len(c) for c in chunks)
        return [SIZE.pack(size) + header, *chunks]


__all__ = ["BadFrameError", "Connections"]
