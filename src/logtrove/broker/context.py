"""What a request handler sees of the broker: :class:`BrokerContext`.

A handler (one module per API family, ``async def handle_x(broker, request)``) reads and
changes the broker's state only through this object: the storage, the group, offset,
producer and transaction coordinators, the credentials and ACLs, the listeners' endpoints,
and the wake-up of long-polling fetches. It does not see the connections, the listeners'
servers, the maintenance thread, the cleaner or the indexer; those belong to
:class:`~logtrove.broker.server.Broker`, which builds one context, hands it to every
handler and owns the rest. So a handler module imports this module and
:mod:`.requests`, never the server, and a test can build a context without starting one.

:class:`Api` (a served key, its versions and its handler) is defined here because its
handler's type names the context; a handler declares what it serves with :func:`serves`
beside its definition, and :mod:`.apis` collects the declarations into the table.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

from logtrove.acl import CLUSTER_NAME, AclStore, Authorizer, Operation, ResourceType
from logtrove.acl.credentials import CredentialStore
from logtrove.broker.access import Rule
from logtrove.broker.config import BrokerConfig
from logtrove.broker.group_commit import GroupCommit
from logtrove.broker.listeners import Listener, SecurityProtocol
from logtrove.broker.producer_state import ProducerStates
from logtrove.broker.requests import Reply, Request
from logtrove.groups import ConsumerGroups, GroupCoordinator, OffsetStore
from logtrove.groups.group_configs import HEARTBEAT_INTERVAL, SESSION_TIMEOUT, GroupConfigs
from logtrove.storage import Storage
from logtrove.txn import TransactionCoordinator, TxnIndexes

Handler = Callable[["BrokerContext", Request], Awaitable[Reply]]
H = TypeVar("H", bound=Handler)

_DECLARED = "__kafka_api__"  # the attribute @serves leaves on a handler


@dataclass(frozen=True)
class Api:
    """A served API: the versions advertised, its handler and its authorization rule."""

    key: int
    min_version: int
    max_version: int
    handler: Handler
    rule: Rule


def serves(key: int, min_version: int, max_version: int, *, access: Rule) -> Callable[[H], H]:
    """Declare the decorated handler as the one of API ``key``, implementing versions
    ``min_version`` to ``max_version`` (the table clips them to what kio decodes), with
    the authorization ``access`` (:mod:`.access`; there is no default: an API cannot be
    served without saying what it needs). The declaration sits beside the handler;
    :func:`declared_apis` collects it."""
    if not isinstance(access, Rule):
        raise TypeError(f"api key {key}: access must be an authorization rule, not {access!r}")

    def declare(handler: H) -> H:
        setattr(handler, _DECLARED, Api(key, min_version, max_version, handler, access))
        return handler

    return declare


def declared_apis(module: ModuleType) -> list[Api]:
    """The APIs the handlers of ``module`` declare with :func:`serves`, in source order."""
    found = (getattr(value, _DECLARED, None) for value in vars(module).values())
    return [api for api in found if isinstance(api, Api)]


class BrokerContext:
    """The state of one broker that its request handlers read and change.

    Built once per :class:`~logtrove.broker.server.Broker` from its storage and config;
    ``apis`` is the table of served APIs (ApiVersions advertises exactly it), and
    ``unsent_bytes`` is kept by the connection loop (replies handed to transports and
    not yet taken) for Fetch's memory budget."""

    def __init__(self, storage: Storage, config: BrokerConfig, apis: dict[int, Api]) -> None:
        self.storage = storage
        self.config = config
        self.apis = apis
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
        # filled in as each listener binds (port 0 asks the system for one)
        self.bound_ports: dict[str, int] = {li.name: li.port for li in self.listeners}
        self.credentials = CredentialStore(storage.path)
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
        self.group_commit = GroupCommit()
        self.acls = AclStore.load(storage.path) if not storage.read_only else AclStore(storage.path)
        self.authorizer = (
            Authorizer(self.acls, frozenset(config.super_users), config.allow_if_no_acl)
            if config.authorizer
            else None
        )
        self.unsent_bytes = 0
        self._appended: asyncio.Future[None] | None = None

    # -- access -------------------------------------------------------------------------
    def allowed(
        self, request: Request, op: Operation, rtype: ResourceType, name: str, *, audited: bool = True
    ) -> bool:
        """Whether the request's principal may perform ``op`` on the resource (always, with
        no authorizer, as Kafka without ``authorizer.class.name``), asked through the
        request's guard, which refuses an operation its API's rule does not declare
        (:mod:`.access`). A denial leaves an audit line (who, from where, what, on which
        resource) unless ``audited`` is off: filtering a listing to what the principal
        may see is not a denied request."""
        return request.guard.allows(op, rtype, name, audited=audited)

    def allowed_cluster(self, request: Request, op: Operation) -> bool:
        return self.allowed(request, op, ResourceType.CLUSTER, CLUSTER_NAME)

    # -- where clients connect ----------------------------------------------------------
    @property
    def host(self) -> str:
        """The host clients of the first listener are told to connect to."""
        return self.endpoint(self.listeners[0])[0]

    @property
    def port(self) -> int:
        """The port clients of the first listener are told to connect to."""
        return self.endpoint(self.listeners[0])[1]

    @property
    def bound_port(self) -> int:
        """The port the first listener is bound to."""
        return self.bound_ports[self.listeners[0].name]

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


__all__ = ["Api", "BrokerContext", "Handler", "declared_apis", "serves"]
