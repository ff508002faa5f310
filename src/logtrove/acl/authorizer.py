"""The authorization decision, as Kafka's ``StandardAuthorizer`` makes it.

For a principal connecting from a host, an operation on a resource:

1. a **super user** (``serve --super-user User:admin``) is always allowed;
2. the bindings that apply are those whose pattern covers the resource (its literal
   name, the wildcard ``*``, or a prefix of it) and whose principal (or ``User:*``) and
   host (or ``*``) match;
3. any applicable DENY of the operation (or of ALL) denies;
4. an applicable ALLOW of the operation (or of ALL) allows; DESCRIBE is also allowed by
   READ, WRITE, DELETE or ALTER, and DESCRIBE_CONFIGS by ALTER_CONFIGS (Kafka's implied
   operations);
5. otherwise, if *no* binding at all covers the resource and
   ``allow.everyone.if.no.acl.found`` is set, allowed; else denied.

A store that could not be loaded fails closed: only super users pass.
"""

from __future__ import annotations

from collections import defaultdict

from logtrove.acl.model import AclBinding, Operation, PatternType, Permission, ResourceType
from logtrove.acl.store import AclStore

ANONYMOUS = "User:ANONYMOUS"  # the principal of an unauthenticated PLAINTEXT connection

_IMPLIED: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


class Authorizer:
    """Decisions over an :class:`AclStore`; its index follows the store's changes."""

    def __init__(
        self, store: AclStore, super_users: frozenset[str] = frozenset(), allow_if_no_acl: bool = False
    ) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._version = -1
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}

    def _index(self) -> None:
        if self._version == self.store.version:
            return
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = defaultdict(list)
        prefixed: dict[ResourceType, list[AclBinding]] = defaultdict(list)
        for b in self.store.bindings:
            if b.pattern_type == PatternType.PREFIXED:
                prefixed[b.resource_type].append(b)
            else:
                literal[(b.resource_type, b.resource_name)].append(b)
        self._literal, self._prefixed, self._version = dict(literal), dict(prefixed), self.store.version

    def covering(self, rtype: ResourceType, name: str) -> list[AclBinding]:
        """Every binding whose pattern covers the resource, whoever it is for."""
        self._index()
        out = list(self._literal.get((rtype, name), ()))
        if name != "*":
            out += self._literal.get((rtype, "*"), ())
        out += [b for b in self._prefixed.get(rtype, ()) if name.startswith(b.resource_name)]
        return out

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        if self.store.unreadable is not None:
            return False
        covering = self.covering(rtype, name)
        if not covering:
            return self.allow_if_no_acl
        wildcard = principal.split(":", 1)[0] + ":*"
        applicable = [b for b in covering if b.principal in (principal, wildcard) and b.host in (host, "*")]
        if any(b.permission == Permission.DENY and b.operation in (op, Operation.ALL) for b in applicable):
            return False
        allowed_by = _IMPLIED.get(op, frozenset({op})) | {Operation.ALL}
        return any(b.permission == Permission.ALLOW and b.operation in allowed_by for b in applicable)

    def authorize_any(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        """Whether ``op`` is allowed on *some* resource of the type (Kafka's
        ``authorizeByResourceType``, used for KIP-679: WRITE on any topic implies
        IDEMPOTENT_WRITE). An ALLOW counts unless a DENY of the same pattern, or a
        wildcard DENY, takes it back."""
        if principal in self.super_users:
            return True
        if self.store.unreadable is not None:
            return False
        wildcard = principal.split(":", 1)[0] + ":*"
        mine = [
            b
            for b in self.store.bindings
            if b.resource_type == rtype and b.principal in (principal, wildcard) and b.host in (host, "*")
        ]
        denied = {
            (b.resource_name, b.pattern_type)
            for b in mine
            if b.permission == Permission.DENY and b.operation in (op, Operation.ALL)
        }
        if ("*", PatternType.LITERAL) in denied:
            return False
        if any(
            b.permission == Permission.ALLOW
            and b.operation in (op, Operation.ALL)
            and (b.resource_name, b.pattern_type) not in denied
            for b in mine
        ):
            return True
        return self.allow_if_no_acl and not any(b.resource_type == rtype for b in self.store.bindings)
