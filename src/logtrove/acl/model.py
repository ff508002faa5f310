"""Kafka's ACL model, with Kafka's numeric codes (they travel in CreateAcls and friends).

A binding says: *principal* from *host* is ALLOWed or DENYed *operation* on the
resources a *pattern* names. A pattern is a resource type, a name and a pattern type:
LITERAL names one resource, or every resource of the type when the name is ``*``;
PREFIXED names every resource whose name starts with it. Principals are ``Type:name``
(``User:alice``; ``User:*`` is every user); hosts are addresses or ``*``.

A filter (DescribeAcls, DeleteAcls) matches bindings: ANY in a field matches every value,
a null name / principal / host matches every one, and the pattern type MATCH matches the
bindings that would apply to a resource of that exact name (its literal, the wildcard and
every prefix of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
MAX_NAME_CHARS = 1000  # resource names, principals and hosts: bounds the store and answers


class AclError(ValueError):
    """A binding or filter that breaks the model's rules; the message says which."""


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
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
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _enum(cls: type[IntEnum], value: Any, field: str) -> Any:
    try:
        return cls(int(value))
    except (ValueError, TypeError):
        raise AclError(f"{field}: {value!r} is not a {cls.__name__} code") from None


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise AclError(f"{field} must be a non-empty string of at most {MAX_NAME_CHARS} characters")
    return value


def check_principal(principal: str) -> str:
    """``Type:name`` with both parts non-empty (Kafka's ``KafkaPrincipal`` form)."""
    kind, sep, name = _text(principal, "principal").partition(":")
    if not sep or not kind or not name:
        raise AclError(f"principal {principal!r} is not of the form Type:name (e.g. User:alice)")
    return principal


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @classmethod
    def checked(
        cls,
        resource_type: Any,
        resource_name: Any,
        pattern_type: Any,
        principal: Any,
        host: Any,
        operation: Any,
        permission: Any,
    ) -> AclBinding:
        """A binding from untrusted fields (a request, a file); raises :class:`AclError`
        with what is wrong, as Kafka's CreateAcls validation does."""
        rtype = _enum(ResourceType, resource_type, "resource type")
        if rtype in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise AclError(f"resource type {rtype.name} cannot be stored in an ACL")
        ptype = _enum(PatternType, pattern_type, "pattern type")
        if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"pattern type {ptype.name} cannot be stored (LITERAL or PREFIXED)")
        name = _text(resource_name, "resource name")
        if rtype == ResourceType.CLUSTER and (name != CLUSTER_NAME or ptype != PatternType.LITERAL):
            raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}, literally")
        op = _enum(Operation, operation, "operation")
        if op in (Operation.ANY, Operation.UNKNOWN):
            raise AclError(f"operation {op.name} cannot be stored in an ACL")
        perm = _enum(Permission, permission, "permission")
        if perm not in (Permission.ALLOW, Permission.DENY):
            raise AclError(f"permission {perm.name} cannot be stored (ALLOW or DENY)")
        return cls(rtype, name, ptype, check_principal(principal), _text(host, "host"), op, perm)

    def applies_to(self, rtype: ResourceType, name: str) -> bool:
        """Whether this binding's pattern covers the resource ``rtype``/``name``."""
        if self.resource_type != rtype:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, "*")

    def to_json(self) -> dict[str, Any]:
        return {
            "resource_type": self.resource_type.name,
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type.name,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.name,
            "permission": self.permission.name,
        }

    @classmethod
    def from_json(cls, data: Any) -> AclBinding:
        if not isinstance(data, dict):
            raise AclError("an ACL entry must be an object")

        def code(cls_: type[IntEnum], key: str) -> int:
            raw = data.get(key)
            if isinstance(raw, str) and raw in cls_.__members__:
                return int(cls_[raw])
            raise AclError(f"{key}: {raw!r} is not one of {', '.join(cls_.__members__)}")

        return cls.checked(
            code(ResourceType, "resource_type"),
            data.get("resource_name"),
            code(PatternType, "pattern_type"),
            data.get("principal"),
            data.get("host"),
            code(Operation, "operation"),
            code(Permission, "permission"),
        )

    def describe(self) -> str:
        """One line for people: ``ALLOW User:alice from * READ on TOPIC orders (LITERAL)``."""
        return (
            f"{self.permission.name} {self.principal} from {self.host} {self.operation.name} on "
            f"{self.resource_type.name} {self.resource_name} ({self.pattern_type.name})"
        )


@dataclass(frozen=True)
class AclFilter:
    """A filter over bindings (DescribeAcls, DeleteAcls); ``None`` fields match all."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    @classmethod
    def checked(
        cls,
        resource_type: Any,
        resource_name: Any,
        pattern_type: Any,
        principal: Any,
        host: Any,
        operation: Any,
        permission: Any,
    ) -> AclFilter:
        """A filter from a request; UNKNOWN codes are refused (Kafka: INVALID_REQUEST)."""
        out = cls(
            _enum(ResourceType, resource_type, "resource type filter"),
            None if resource_name is None else str(resource_name),
            _enum(PatternType, pattern_type, "pattern type filter"),
            None if principal is None else str(principal),
            None if host is None else str(host),
            _enum(Operation, operation, "operation filter"),
            _enum(Permission, permission, "permission filter"),
        )
        unknown = [
            label
            for label, value in (
                ("resource type", out.resource_type),
                ("pattern type", out.pattern_type),
                ("operation", out.operation),
                ("permission", out.permission),
            )
            if value == 0
        ]
        if unknown:
            raise AclError(f"filter fields may not be UNKNOWN: {', '.join(unknown)}")
        return out

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not b.applies_to(b.resource_type, self.resource_name):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, b.pattern_type):
                return False
            if self.resource_name is not None and self.resource_name != b.resource_name:
                return False
        return (
            self.principal in (None, b.principal)
            and self.host in (None, b.host)
            and self.operation in (Operation.ANY, b.operation)
            and self.permission in (Permission.ANY, b.permission)
        )
