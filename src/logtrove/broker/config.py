"""The settings of one broker process (:class:`BrokerConfig`), each with Kafka's name for it
where Kafka has one; ``logtrove serve`` builds it from its flags."""

from __future__ import annotations

from dataclasses import dataclass

from logtrove.broker.listeners import Listener, TlsSettings
from logtrove.storage import DEFAULT_MAX_TOTAL_PARTITIONS
from logtrove.storage.cleaner.scheduler import DEFAULT_MAP_BUDGET
from logtrove.txn import DEFAULT_MAX_TIMEOUT_MS

DEFAULT_MAX_FRAME = 100 * 1024 * 1024
DEFAULT_FETCH_MAX = 55 * 1024 * 1024  # Kafka's broker fetch.max.bytes
DEFAULT_FETCH_MEMORY = 256 * 1024 * 1024


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
