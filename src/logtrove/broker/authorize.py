"""Authorized operations: the bit fields Kafka returns in Metadata, DescribeGroups and
DescribeCluster when a client asks (``include_*_authorized_operations``).

Each operation is Kafka's ``AclOperation`` code and the field is ``sum(1 << code)`` over
the operations the principal may perform on the resource. With no authorizer configured
Kafka answers every operation the resource type supports (``AclEntry.supportedOperations``),
and so does logtrove until ACLs come (issue 16), when :func:`authorized_operations`
becomes principal-aware. A field the client did not ask for is
:data:`OMITTED` (``INT32_MIN``), as Kafka leaves it.
"""

from __future__ import annotations

from enum import IntEnum

OMITTED = -(2**31)


class Operation(IntEnum):
    """Kafka's ``AclOperation`` codes."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Resource(IntEnum):
    """Kafka's ``ResourceType`` codes of the resources that carry authorized operations."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4


_O = Operation
SUPPORTED: dict[Resource, frozenset[Operation]] = {
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


def authorized_operations(resource: Resource, asked: bool = True) -> int:
    """The authorized-operations field for ``resource`` (every supported operation: no
    authorizer), or :data:`OMITTED` when the client did not ask."""
    if not asked:
        return OMITTED
    return sum(1 << op for op in SUPPORTED[resource])
