"""Accepting the connections of a TLS listener: admitted first, then the handshake.

``asyncio.start_server(ssl=...)`` hands a connection to its callback only once the TLS
handshake is over, so a connection could not be counted against ``max_connections``
before then: clients that connect and never finish (or never begin) a handshake would
hold descriptors outside every limit. Kafka counts a connection when it accepts it; so
does :class:`TlsAcceptor`, which accepts the listening socket's connections itself,
admits each by its address (a refused one is closed before any TLS byte), and only then
runs the handshake (:meth:`asyncio.AbstractEventLoop.connect_accepted_socket`, bounded by
``handshake_timeout_s``). A failed handshake releases its admission; a finished one
passes the connection, still admitted, to ``serve``, which releases it when it ends.
(Taking over an accepted plain connection with ``StreamWriter.start_tls`` is not an
option: bytes the client sent first may already sit in the plain reader's buffer.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable

log = logging.getLogger("logtrove.broker")

STREAM_LIMIT = 1 << 20  # the StreamReader buffer limit, as for the plain listeners
ACCEPT_BACKOFF_S = 0.1  # after an accept error (EMFILE): let descriptors free up


def listening_socket(host: str, port: int) -> socket.socket:
    """A non-blocking listening TCP socket on ``host:port`` (the first address it resolves to)."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    sock = socket.create_server((host, port), family=family, backlog=1024)
    sock.setblocking(False)
    return sock


class TlsAcceptor:
    """Accepts, admits and handshakes the connections of one TLS listening socket."""

    def __init__(
        self,
        sock: socket.socket,
        context: ssl.SSLContext,
        *,
        admit: Callable[[str], bool],
        release: Callable[[str], None],
        serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
        handshake_timeout_s: float,
    ) -> None:
        self.sock = sock
        self.context = context
        self._admit, self._release, self._serve = admit, release, serve
        self._timeout_s = handshake_timeout_s
        self._task: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def start(self) -> None:
        self._task = asyncio.create_task(self._accept(), name=f"tls-accept-{self.port}")

    def close(self) -> None:
        """Stop accepting and abandon the handshakes under way."""
        if self._task is not None:
            self._task.cancel()
        for task in list(self._handshakes):
            task.cancel()
        self.sock.close()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(self.sock)
            except OSError as exc:
                log.warning("accepting a TLS connection failed: %s", exc)
                await asyncio.sleep(ACCEPT_BACKOFF_S)
                continue
            address = str(peer[0])
            if not self._admit(address):
                conn.close()
                continue
            task = asyncio.create_task(self._handshake(conn, address))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, conn: socket.socket, address: str) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=STREAM_LIMIT)
        protocol = asyncio.StreamReaderProtocol(reader, self._serve)
        try:
            await loop.connect_accepted_socket(
                lambda: protocol, conn, ssl=self.context, ssl_handshake_timeout=self._timeout_s
            )
        except (OSError, ssl.SSLError, TimeoutError, asyncio.CancelledError) as exc:
            self._release(address)
            with contextlib.suppress(OSError):
                conn.close()
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.debug("TLS handshake with %s failed: %s", address, exc)


__all__ = ["TlsAcceptor", "listening_socket"]
