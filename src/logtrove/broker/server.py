"""The broker process: an asyncio (uvloop) TCP server speaking the Kafka protocol.

One event loop serves every connection (:mod:`.connections`) and does the appends (a
produce is a ``pwritev``); fsyncs due to ``flush.ms``, retention and checkpoints run in
a maintenance thread; the cleaner compacts in a thread of its own, and the indexer
follows the logs in a child process (its parsing would otherwise hold the GIL the loop
needs). Expired transactions are aborted by a task on the loop, since their markers are
appends.

:class:`Broker` owns those parts and their lifecycle (:meth:`Broker.start`,
:meth:`Broker.stop`); the state request handlers see is its
:class:`~logtrove.broker.context.BrokerContext`. Listeners (:mod:`.listeners`): one
server per listener, PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; a TLS listener admits
connections before their handshake (:mod:`.tls_accept`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from logtrove.broker.apis import build_api_table
from logtrove.broker.config import BrokerConfig
from logtrove.broker.connections import BadFrameError, Connections
from logtrove.broker.context import BrokerContext
from logtrove.broker.frames import start_frame_server
from logtrove.broker.limits import ConnectionLimits, default_max_connections
from logtrove.broker.listeners import Listener, server_context
from logtrove.broker.tls_accept import TlsAcceptor, listening_socket
from logtrove.storage import Storage
from logtrove.storage.cleaner import Cleaner
from logtrove.storage.derived import blockentries
from logtrove.storage.derived.process import IndexerProcess
from logtrove.storage.files import FILE_POOL, raise_fd_limit

log = logging.getLogger("logtrove.broker")


class Broker:
    """The Kafka-protocol front of one data directory."""

    def __init__(self, storage: Storage, config: BrokerConfig) -> None:
        self.storage = storage
        self.config = config
        storage.max_partitions = config.max_partitions
        self.context = BrokerContext(storage, config, build_api_table())
        self.limits = ConnectionLimits(
            config.max_connections or default_max_connections(), config.max_connections_per_ip
        )
        self.connections = Connections(self.context, self.limits)
        self._servers: list[asyncio.Server] = []
        self._acceptors: list[TlsAcceptor] = []
        self._watch: asyncio.Task[None] | None = None
        self._stop_maintenance = threading.Event()
        self._maintenance: threading.Thread | None = None
        self._txn_timeouts: asyncio.Task[None] | None = None
        self.cleaner: Cleaner | None = None
        self.indexer: IndexerProcess | None = None
        # called first in stop(), before storage closes (a mirror thread writing to it)
        self.before_stop: list[Callable[[], None]] = []

    @property
    def host(self) -> str:
        """The host clients of the first listener are told to connect to."""
        return self.context.host

    @property
    def port(self) -> int:
        """The port clients of the first listener are told to connect to."""
        return self.context.port

    @property
    def bound_port(self) -> int:
        """The port the first listener is bound to."""
        return self.context.bound_port

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        context = self.context
        context.offsets.load()
        context.txn.load()
        for listener in context.listeners:
            if listener.protocol.tls:
                context.bound_ports[listener.name] = self._start_tls_listener(listener)
                continue
            server = await start_frame_server(
                functools.partial(self.connections.serve, listener),
                listener.host,
                listener.port,
                limit=1 << 20,
            )
            self._servers.append(server)
            context.bound_ports[listener.name] = int(server.sockets[0].getsockname()[1])
        self._watch = asyncio.create_task(self.connections.watch(), name="connection-watch")
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
        context.groups.start()
        context.consumer_groups.start()

    def _start_tls_listener(self, listener: Listener) -> int:
        """Listen on a TLS listener (connections admitted before their handshake, see
        :mod:`.tls_accept`); the bound port."""
        assert self.config.tls is not None, "a TLS listener needs BrokerConfig.tls"
        acceptor = TlsAcceptor(
            listening_socket(listener.host, listener.port),
            server_context(self.config.tls, listener.protocol),
            admit=self.limits.admit,
            release=self.limits.release,
            serve=functools.partial(self.connections.serve, listener, admitted=True),
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
        await self.connections.close()
        context = self.context
        context.group_commit.close()
        await context.groups.stop()
        await context.consumer_groups.stop()
        try:
            context.txn.save_now()
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
        context.txn.indexes.write_end_snapshots()  # after the last append: the next start reads no log

    async def _abort_expired_transactions(self) -> None:
        """Abort the transactions past their timeout, every maintenance interval, on the
        event loop (the markers are appends, which happen only on the loop)."""
        while True:
            await asyncio.sleep(self.config.maintenance_interval_ms / 1000)
            try:
                self.context.txn.abort_expired()
                await self.context.txn.flush()
            except Exception:  # the task must survive one bad round; the next retries
                log.exception("aborting expired transactions failed")

    def _maintenance_loop(self) -> None:
        interval = self.config.maintenance_interval_ms / 1000
        while not self._stop_maintenance.wait(interval):
            try:
                self.storage.run_maintenance()
            except Exception:  # the loop must survive one bad round; the next retries
                log.exception("maintenance round failed")


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
