"""Authorization with Kafka's ACL model: bindings, their store, and the decision.

* :mod:`.model`: resource types, pattern types, operations and permissions with Kafka's
  codes; :class:`~.model.AclBinding` and :class:`~.model.AclFilter`.
* :mod:`.store`: the bindings of a data directory (``DATA_DIR/acls.json``).
* :mod:`.authorizer`: the decision for one principal, host, operation and resource, as
  Kafka's ``StandardAuthorizer`` makes it.
"""

from logtrove.acl.authorizer import ANONYMOUS, Authorizer
from logtrove.acl.model import (
    CLUSTER_NAME,
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from logtrove.acl.store import AclStore

__all__ = [
    "ANONYMOUS",
    "CLUSTER_NAME",
    "AclBinding",
    "AclError",
    "AclFilter",
    "AclStore",
    "Authorizer",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
]
