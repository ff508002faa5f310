"""The broker process: an asyncio (uvloop) TCP server speaking the Kafka protocol.

One event loop serves every connection and does the appends (a produce is a
``pwritev``); fsyncs due to ``flush.ms``, retention and checkpoints run in a
maintenance thread; the cleaner compacts in a thread of its own, and the indexer follows
the logs in a child process (its parsing would otherwise hold the GIL the loop needs). Each connection is served strictly in order, one request at a time
(as Kafka does by muting the channel): a request is read, handled, its response written,
and only then is the next frame read, so responses are always in request order and a
slow client holds at most one frame in memory (``max_frame_bytes``) plus what the
transport buffers before back-pressure (``drain``) applies. A connection whose reply is
not being taken is not read any further (Kafka mutes such a channel), and when it goes,
its transport is aborted and no frame keeps its buffers: an unsent reply is freed at once.

Limits, as Kafka's: connections over ``max_connections`` in total or
``max_connections_per_ip`` from one address are closed when accepted; a connection with
no request for ``connections_max_idle_ms``, or whose reply is not taken for that long,
is closed; a request frame that has begun must arrive whole within
``request_read_timeout_ms`` (a slow sender cannot hold a connection and a half-read
frame forever). One periodic scan checks the timeouts (no timer per request). The
replies not yet taken by their clients count against ``fetch_memory_bytes``: past it,
each Fetch gives one batch (so consumers still progress) until readers catch up or leave.

A frame that cannot be decoded closes only its own connection; a version the broker
does not serve gets ``UNSUPPORTED_VERSION`` for ApiVersions (answered in v0 so any
client can read it) and closes the connection for the other APIs, as Kafka does. Bytes
after a whole request in its frame are ignored, as Kafka ignores them (its
``AbstractRequest.parseRequest`` never checks that the buffer was used up, and
librdkafka's Metadata v12 carries three such bytes).

Listeners (:mod:`.listeners`): one server per listener, PLAINTEXT, SSL, SASL_PLAINTEXT or
SASL_SSL; each connection has a :class:`~logtrove.broker.sasl.Session` naming its
listener and principal, which handlers read from :attr:`Request.session`. TLS is done by
the transport (the handshake is over before the connection is served); on a SASL
listener, frames go through :meth:`Broker._handle_unauthenticated` until the session is
authenticated (see :mod:`.sasl`), and PLAINTEXT connections take the same path as before
(one attribute test per request).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from logtrove.acl import CLUSTER_NAME, AclStore, Authorizer, Operation, ResourceType
from logtrove.acl.credentials import CredentialStore
from logtrove.broker.apis import build_api_table, unsupported_api_versions
from logtrove.broker.frames import IN_PLACE_MAX, FrameReader, start_frame_server
from logtrove.broker.group_commit import GroupCommit
from logtrove.broker.limits import Connection, ConnectionLimits, Phase, default_max_connections, overdue
from logtrove.broker.listeners import (
    ANONYMOUS,
    Listener,
    SecurityProtocol,
    TlsSettings,
    principal_of_certificate,
    server_context,
)
from logtrove.broker.produce import ProducerStates
from logtrove.broker.requests import Api, RawBody, Request
from logtrove.broker.sasl import (
    MAX_UNAUTHENTICATED_FRAME,
    PRE_AUTH_KEYS,
    SaslAuthenticationError,
    SaslState,
    Session,
    authenticate_step,
)
from logtrove.broker.tls_accept import TlsAcceptor, listening_socket
from logtrove.groups import ConsumerGroups, GroupCoordinator, OffsetStore
from logtrove.groups.group_configs import HEARTBEAT_INTERVAL, SESSION_TIMEOUT, GroupConfigs
from logtrove.storage import DEFAULT_MAX_TOTAL_PARTITIONS, Storage
from logtrove.storage.cleaner import Cleaner
from logtrove.storage.cleaner.scheduler import DEFAULT_MAP_BUDGET
from logtrove.storage.derived import blockentries
from logtrove.storage.derived.process import IndexerProcess
from logtrove.storage.files import FILE_POOL, raise_fd_limit
from logtrove.txn import DEFAULT_MAX_TIMEOUT_MS, TransactionCoordinator, TxnIndexes
from logtrove.wire import SIZE, ApiKey, build, encode, response_header
from logtrove.wire.framing import REQUEST_PREFIX
from logtrove.wire.produce import MalformedRequestError, decode_produce_request

log = logging.getLogger("logtrove.broker")
audit = logging.getLogger("logtrove.audit")  # one line per denied request

DEFAULT_MAX_FRAME = 100 * 1024 * 1024
DEFAULT_FETCH_MAX = 55 * 1024 * 1024  # Kafka's broker fetch.max.bytes
DEFAULT_FETCH_MEMORY = 256 * 1024 * 1024
# bound once: looking a member up on the enum class costs ~50 ns, per request here
_PRODUCE, _API_VERSIONS = ApiKey.PRODUCE, ApiKey.API_VERSIONS
PRODUCE_PREFIX = int(ApiKey.PRODUCE).to_bytes(2, "big")  # a request frame's first bytes: its api key


@dataclass(frozen=True)
class BrokerConfig:
    """Settings of one broker process."""

    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    auto_create_topics: bool = True
    default_partitions: int = 1
    max_frame_bytes: int = DEFAULT_MAX_FRAME
    initial_rebalance_delay_ms: int = 3000
    consumer_session_timeout_ms: int = 45_000  # [group.consumer.session.timeout.ms]
    consumer_heartbeat_interval_ms: int = 5000  # [group.consumer.heartbeat.interval.ms]
    maintenance_interval_ms: int = 1000
    offsets_partitions: int = 1
    indexer: bool = True  # a child process writes the key, tag and skip indexes
    indexer_flush_ms: int = 5000  # a partial block for the newest records at least this often
    # a new backlog waits this long (at most indexer_flush_ms) before the indexer parses it,
    # so a producer's burst is not slowed by the indexer (Indexer._deferring)
    indexer_defer_ms: int = 1000
    cleaner: bool = True  # a thread compacts the compacted topics (incl. __consumer_offsets)
    cleaner_interval_ms: int = 5000
    cleaner_map_bytes: int = DEFAULT_MAP_BUDGET
    # limits of the Kafka listener; Kafka's setting in brackets
    fetch_max_bytes: int = DEFAULT_FETCH_MAX  # record bytes of one Fetch response [fetch.max.bytes]
    max_connections: int | None = None  # None: half the descriptor soft limit [max.connections]
    max_connections_per_ip: int | None = None  # None: no per-address limit [max.connections.per.ip]
    connections_max_idle_ms: int = 600_000  # [connections.max.idle.ms]
    request_read_timeout_ms: int = 30_000  # a begun request frame must arrive whole within this
    fetch_memory_bytes: int = (
        DEFAULT_FETCH_MEMORY  # all unsent replies together; past it a Fetch gives one batch
    )
    max_partitions: int = DEFAULT_MAX_TOTAL_PARTITIONS  # total over all topics (Storage.max_partitions)
    durable_acks: bool = False  # acks=1/all wait for the fsync on every topic (as flush.messages=1)
    authorizer: bool = False  # enforce the ACLs of DATA_DIR/acls.json [authorizer.class.name]
    super_users: tuple[str, ...] = ()  # principals every operation is allowed to [super.users]
    allow_if_no_acl: bool = False  # a resource no ACL covers is open [allow.everyone.if.no.acl.found]
    # listeners; empty: one PLAINTEXT listener on host:port (advertised_host/port)
    listeners: tuple[Listener, ...] = ()
    tls: TlsSettings | None = None  # what SSL and SASL_SSL listeners serve with
    sasl_auth_timeout_ms: int = 10_000  # a SASL connection must be authenticated within this
    transaction_max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS  # [transaction.max.timeout.ms]


class BadFrameError(Exception):
    """A frame that cannot be decoded or is of a version we do not serve."""


@cache
def _schemas(api_key: int, version: int) -> tuple[type, type, Any, Any]:
    req_cls = load_request_schema(api_key, version)
    resp_cls = load_response_schema(api_key, version)
    return req_cls, resp_cls, entity_reader(req_cls.__header_schema__), entity_reader(req_cls)


class Broker:
    """The Kafka-protocol front of one data directory."""

    def __init__(self, storage: Storage, config: BrokerConfig) -> None:
        self.storage = storage
        self.config = config
        storage.max_partitions = config.max_partitions
        self.apis: dict[int, Api] = build_api_table()
        self.node_id = storage.data_dir.broker_id
        self.cluster_id = storage.data_dir.cluster_id
        self.listeners: list[Listener] = list(config.listeners) or [
            Listener(
                SecurityProtocol.PLAINTEXT,
                config.host,
                config.port,
                config.advertised_host,
                config.advertised_port,
            )
        ]
        self.bound_ports: dict[str, int] = {li.name: li.port for li in self.listeners}
        self.bound_port = self.listeners[0].port  # the first listener's
        self.credentials = CredentialStore(storage.path)
        self._servers: list[asyncio.Server] = []
        self._acceptors: list[TlsAcceptor] = []
        self.offsets = OffsetStore(storage, partitions=config.offsets_partitions)
        self.groups = GroupCoordinator(
            self.offsets, initial_rebalance_delay_ms=config.initial_rebalance_delay_ms
        )
        self.group_configs = GroupConfigs(
            storage.path,
            lambda: {
                SESSION_TIMEOUT: config.consumer_session_timeout_ms,
                HEARTBEAT_INTERVAL: config.consumer_heartbeat_interval_ms,
            },
        )
        self.consumer_groups = ConsumerGroups(
            self.offsets,
            storage.path,
            lambda: {t.name: t.partitions for t in storage.topics()},
            session_timeout_ms=config.consumer_session_timeout_ms,
            session_timeout_of=lambda group: self.group_configs.value(group, SESSION_TIMEOUT),
        )
        self._appended: asyncio.Future[None] | None = None
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._watch: asyncio.Task[None] | None = None
        self.unsent_bytes = 0  # replies handed to transports and not yet taken down to low water
        self._stop_maintenance = threading.Event()
        self._maintenance: threading.Thread | None = None
        self.producers = ProducerStates(storage.clock.now_ms())
        self.txn = TransactionCoordinator(
            storage,
            self.offsets,
            TxnIndexes(),
            self.producers.new_producer_id,
            clock=storage.clock,
            notify=self.notify_append,
            max_timeout_ms=config.transaction_max_timeout_ms,
            sync=config.durable_acks,  # the state is as durable as acknowledged records
        )
        self._txn_timeouts: asyncio.Task[None] | None = None
        self.group_commit = GroupCommit()
        self.cleaner: Cleaner | None = None
        self.indexer: IndexerProcess | None = None
        self.limits = ConnectionLimits(
            config.max_connections or default_max_connections(), config.max_connections_per_ip
        )
        # called first in stop(), before storage closes (a mirror thread writing to it)
        self.before_stop: list[Callable[[], None]] = []
        self.acls = AclStore.load(storage.path) if not storage.read_only else AclStore(storage.path)
        self.authorizer = (
            Authorizer(self.acls, frozenset(config.super_users), config.allow_if_no_acl)
            if config.authorizer
            else None
        )

    def allowed(
        self, request: Request, op: Operation, rtype: ResourceType, name: str, *, audited: bool = True
    ) -> bool:
        """Whether the request's principal may perform ``op`` on the resource (always, with
        no authorizer, as Kafka without ``authorizer.class.name``). A denial leaves an
        audit line (who, from where, what, on which resource) unless ``audited`` is off:
        filtering a listing to what the principal may see is not a denied request."""
        if self.authorizer is None:
            return True
        if self.authorizer.authorize(request.principal, request.host, op, rtype, name):
            return True
        if audited:
            audit.info(
                "denied %s from %s: %s on %s %r (api key %d)",
                request.principal,
                request.host,
                op.name,
                rtype.name,
                name,
                request.api_key,
            )
        return False

    def allowed_cluster(self, request: Request, op: Operation) -> bool:
        return self.allowed(request, op, ResourceType.CLUSTER, CLUSTER_NAME)

    @property
    def host(self) -> str:
        """The host clients of the first listener are told to connect to."""
        return self.endpoint(self.listeners[0])[0]

    @property
    def port(self) -> int:
        """The port clients of the first listener are told to connect to."""
        return self.endpoint(self.listeners[0])[1]

    def endpoint(self, listener: Listener) -> tuple[str, int]:
        """The host and port clients of ``listener`` are told to connect to (the bound
        ones unless advertised): Kafka answers with the endpoint of the listener the
        request came through."""
        return (
            listener.advertised_host or listener.host,
            listener.advertised_port or self.bound_ports[listener.name],
        )

    # -- appends and long polls ---------------------------------------------------------
    def notify_append(self) -> None:
        """Wake the fetches waiting for data (called after every successful append)."""
        fut, self._appended = self._appended, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def wait_for_append(self, timeout_s: float) -> None:
        """Wait until the next append or ``timeout_s``, whichever comes first."""
        if timeout_s <= 0:
            return
        if self._appended is None:
            self._appended = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._appended), timeout_s)

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self.offsets.load()
        self.txn.load()
        for listener in self.listeners:
            if listener.protocol.tls:
                self.bound_ports[listener.name] = self._start_tls_listener(listener)
                continue
            server = await start_frame_server(
                functools.partial(self._serve_connection, listener),
                listener.host,
                listener.port,
                limit=1 << 20,
            )
            self._servers.append(server)
            self.bound_ports[listener.name] = int(server.sockets[0].getsockname()[1])
        self.bound_port = self.bound_ports[self.listeners[0].name]
        self._watch = asyncio.create_task(self._watch_connections(), name="connection-watch")
        self._txn_timeouts = asyncio.create_task(self._abort_expired_transactions(), name="txn-timeouts")
        self._maintenance = threading.Thread(target=self._maintenance_loop, name="maintenance", daemon=True)
        self._maintenance.start()
        if self.config.cleaner:
            self.cleaner = Cleaner(self.storage, map_budget_bytes=self.config.cleaner_map_bytes)
            self.cleaner.start(self.config.cleaner_interval_ms / 1000)
        if self.config.indexer:
            self.indexer = IndexerProcess(
                self.storage.path,
                tail_flush_s=self.config.indexer_flush_ms / 1000,
                defer_s=self.config.indexer_defer_ms / 1000,
            )
            self.indexer.start()
            if blockentries.NATIVE is None:
                log.warning(
                    "the indexer runs its pure-Python loop (about 200 k records/s): it falls behind "
                    "sustained produce; install gcc and libxxhash-dev and reinstall logtrove to compile it"
                )
        self.groups.start()
        self.consumer_groups.start()

    def _start_tls_listener(self, listener: Listener) -> int:
        """Listen on a TLS listener (connections admitted before their handshake, see
        :mod:`.tls_accept`); the bound port."""
        assert self.config.tls is not None, "a TLS listener needs BrokerConfig.tls"
        acceptor = TlsAcceptor(
            listening_socket(listener.host, listener.port),
            server_context(self.config.tls, listener.protocol),
            admit=self.limits.admit,
            release=self.limits.release,
            serve=functools.partial(self._serve_connection, listener, admitted=True),
            handshake_timeout_s=self.config.request_read_timeout_ms / 1000,
        )
        acceptor.start()
        self._acceptors.append(acceptor)
        return acceptor.port

    async def stop(self) -> None:
        """Stop accepting, close connections, stop maintenance, close storage."""
        for hook in self.before_stop:
            hook()
        for server in self._servers:
            server.close()
        for acceptor in self._acceptors:
            acceptor.close()
        if self._watch is not None:
            self._watch.cancel()
        if self._txn_timeouts is not None:
            self._txn_timeouts.cancel()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        self.group_commit.close()
        await self.groups.stop()
        await self.consumer_groups.stop()
        try:
            self.txn.save_now()
        except OSError:
            log.exception("cannot write the transaction state at shutdown (a restart completes or aborts)")
        if self.indexer is not None:
            self.indexer.stop()
        if self.cleaner is not None:
            self.cleaner.stop()
        self._stop_maintenance.set()
        if self._maintenance is not None:
            self._maintenance.join(timeout=30)
        self.storage.close()
        self.txn.indexes.write_end_snapshots()  # after the last append: the next start reads no log

    async def _abort_expired_transactions(self) -> None:
        """Abort the transactions past their timeout, every maintenance interval, on the
        event loop (the markers are appends, which happen only on the loop)."""
        while True:
            await asyncio.sleep(self.config.maintenance_interval_ms / 1000)
            try:
                self.txn.abort_expired()
                await self.txn.flush()
            except Exception:  # the task must survive one bad round; the next retries
                log.exception("aborting expired transactions failed")

    def _maintenance_loop(self) -> None:
        interval = self.config.maintenance_interval_ms / 1000
        while not self._stop_maintenance.wait(interval):
            try:
                self.storage.run_maintenance()
            except Exception:  # the loop must survive one bad round; the next retries
                log.exception("maintenance round failed")

    # -- connections -------------------------------------------------------------------
    def _new_session(self, listener: Listener, writer: asyncio.StreamWriter, conn: Connection) -> Session:
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

    async def _serve_connection(
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
        session = self._new_session(listener, writer, conn)
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
                    self.unsent_bytes += size
                    try:
                        await self._send(writer, reply)
                    finally:
                        self.unsent_bytes -= size
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

    async def _watch_connections(self) -> None:
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
                token = await authenticate_step(self, session, bytes(frame))
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
                api_key, version, correlation_id, produce.client_id, produce, version >= 9, resp_cls, session
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
        )

    async def _handle_frame(
        self, frame: bytes | bytearray, session: Session
    ) -> list[bytes | memoryview] | None:
        api_key, version, correlation_id = REQUEST_PREFIX.unpack_from(frame, 0)
        if api_key == _API_VERSIONS and not self._serves(api_key, version):
            return self._frame(unsupported_api_versions(self), correlation_id, False, api_key)
        request = self._decode(frame, session)
        api = self.apis[request.api_key]
        reply = await api.handler(self, request)
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


def run(storage: Storage, config: BrokerConfig, *, ready: Callable[[Broker], None] | None = None) -> None:
    """Run a broker until SIGINT or SIGTERM, then shut down cleanly (uvloop if present)."""
    try:
        import uvloop

        runner: Callable[[Any], Any] = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    fit_descriptors(config)
    runner(_main(storage, config, ready))


def fit_descriptors(config: BrokerConfig) -> None:
    """Raise the soft descriptor limit to the hard one and size the segment file pool
    for it (see storage.files); warn when writing ``max_partitions`` partitions at once
    would need more descriptors than the limit leaves."""
    limit = raise_fd_limit()
    FILE_POOL.fit_to_limit(limit)
    if FILE_POOL.keep_limit < config.max_partitions:
        log.info(
            "ulimit -n is %d: at most %d partitions keep a file open for writing, the others reopen "
            "theirs through a pool (slower appends); raise ulimit -n to %d for %d partitions",
            limit,
            FILE_POOL.keep_limit,
            2 * (config.max_partitions + FILE_POOL.capacity),
            config.max_partitions,
        )


async def _main(storage: Storage, config: BrokerConfig, ready: Callable[[Broker], None] | None) -> None:
    broker = Broker(storage, config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except BaseException:
        storage.close()
        raise
    if ready is not None:
        ready(broker)
    started = time.monotonic()
    await stop.wait()
    log.info("shutting down after %.1f s", time.monotonic() - started)
    await broker.stop()


__all__ = [
    "BadFrameError",
    "Broker",
    "BrokerConfig",
    "run",
]
