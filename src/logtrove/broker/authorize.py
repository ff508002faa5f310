"""Authorized operations: the bit fields Kafka returns in Metadata, DescribeGroups and
DescribeCluster when a client asks (``include_*_authorized_operations``).

Each operation is Kafka's ``AclOperation`` code and the field is ``sum(1 << code)`` over
the operations the principal may perform on the resource, among those the resource type
supports (``AclEntry.supportedOperations``). With no authorizer every supported
operation is answered, as Kafka does; with one, those the ACLs allow the request's
principal (no audit line: asking is not being denied). A field the client did not ask
for is :data:`OMITTED` (``INT32_MIN``), as Kafka leaves it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logtrove.acl import CLUSTER_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Request

OMITTED = -(2**31)


Resource = ResourceType  # the resource types that carry authorized operations: TOPIC, GROUP, CLUSTER


_O = Operation
SUPPORTED: dict[ResourceType, frozenset[Operation]] = {
    Resource.TOPIC: frozenset(
        {
            _O.READ,
            _O.WRITE,
            _O.CREATE,
            _O.DESCRIBE,
            _O.DELETE,
            _O.ALTER,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
        }
    ),
    Resource.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE}),
    Resource.CLUSTER: frozenset(
        {
            _O.CREATE,
            _O.CLUSTER_ACTION,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
            _O.IDEMPOTENT_WRITE,
            _O.ALTER,
            _O.DESCRIBE,
        }
    ),
}


def authorized_operations(
    broker: BrokerContext,
    request: Request,
    resource: ResourceType,
    name: str = CLUSTER_NAME,
    asked: bool = True,
) -> int:
    """The authorized-operations field of resource ``name`` for the request's principal,
    or :data:`OMITTED` when the client did not ask."""
    if not asked:
        return OMITTED
    auth = broker.authorizer
    return sum(
        1 << op
        for op in SUPPORTED[resource]
        if auth is None or auth.authorize(request.principal, request.host, op, resource, name)
    )
