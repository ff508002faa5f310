"""Who may call what: the authorization rule each served API declares beside its handler,
and the :class:`Guard` through which the dispatcher enforces it.

Every ``@serves`` names a :class:`Rule` (``serves`` has no default for it, and the API
table refuses a handler without one), so a new API cannot be served without saying what
it needs. A rule is one of three kinds, after Kafka's table of operations per API (KIP-11
and each API's KIP):

* :func:`no_acl`: Kafka asks for no ACL (ApiVersions, the SASL exchange). The reason is
  written in the declaration.
* :func:`on_cluster`: an operation on the cluster, checked by the dispatcher *before* the
  handler runs. A denied request never reaches its handler: it is answered by the rule's
  ``refused`` builder (by default the response's top-level ``error_code`` and
  ``error_message``) and leaves an audit line.
* :func:`per_resource`: the operations the handler checks on the resources a request
  names (topics, groups, transactional IDs, or the cluster), each a :class:`Check`. The
  handler asks through the request's guard (``broker.allowed``), and the guard refuses a
  question the declaration does not list (:class:`UndeclaredCheckError`). A check that says
  how the names are taken from the request (``names``) is also verified after the
  handler: a denied name the handler never asked about means it acted without asking,
  and the connection is closed without a reply (:class:`AccessNotEnforcedError`) rather than
  answered. A ``listing`` check filters what the principal may not see out of an answer
  (no audit line: not seeing is not being denied).

With no authorizer (Kafka without ``authorizer.class.name``) every question is allowed,
but undeclared questions are still refused, so the declarations are exercised by every
test, not only by those that turn the authorizer on.

Audit lines (logger ``logtrove.audit``) are one line each: every field a client chose
(principal, resource name) is written through :func:`printable` or :func:`repr`, so a
newline in a user name cannot forge a second line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from logtrove.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType

audit = logging.getLogger("logtrove.audit")


class Request(Protocol):
    """What a rule reads of a request (:class:`~logtrove.broker.requests.Request`, which
    holds its guard, so this module cannot name it)."""

    @property
    def body(self) -> Any: ...

    @property
    def version(self) -> int: ...


Reply = Mapping[str, Any]
Names = Callable[[Request], Iterable[str]]
Refusal = Callable[[Request, int, str], Reply]


class UndeclaredCheckError(RuntimeError):
    """A handler asked about an operation its API's rule does not declare: a programming
    error, answered by closing the connection (the dispatcher's internal-error path)."""


class AccessNotEnforcedError(RuntimeError):
    """A handler answered a request naming a resource the principal may not use without
    asking the authorizer about it: the reply is dropped and the connection closed."""


def printable(text: str) -> str:
    """``text`` as it is when every character is printable, else its :func:`repr`
    (escaped, quoted): what an audit line may hold of a name a client chose."""
    return text if text.isprintable() else repr(text)


def top_level_error(request: Request, code: int, message: str) -> Reply:
    """A refusal in the response's top-level ``error_code`` and ``error_message`` (every
    other field at its default), as Kafka's ``getErrorResponse`` answers most APIs."""
    return {"error_code": code, "error_message": message}


@dataclass(frozen=True)
class Check:
    """One question a handler asks: ``operation`` on resources of type ``resource``.

    ``names`` takes the names the request carries (verified after the handler);
    ``None`` when they depend on state the handler reads (a topic Metadata would
    auto-create). ``listing``: a denied name is left out of the answer, not refused.
    """

    resource: ResourceType
    operation: Operation
    names: Names | None = None
    listing: bool = False


@dataclass(frozen=True)
class Rule:
    """The authorization of one API (build it with :func:`no_acl`, :func:`on_cluster` or
    :func:`per_resource`)."""

    kind: str  # "none", "cluster" or "resources"
    reason: str = ""
    cluster: Operation | None = None
    refused: Refusal = top_level_error
    applies: Callable[[Request], bool] | None = None  # the cluster check only when this holds
    checks: tuple[Check, ...] = ()

    def declared(self) -> frozenset[tuple[ResourceType, Operation]]:
        """The (resource type, operation) pairs a handler of this rule may ask about."""
        pairs = {(c.resource, c.operation) for c in self.checks}
        if self.cluster is not None:
            pairs.add((ResourceType.CLUSTER, self.cluster))
        return frozenset(pairs)


def no_acl(reason: str) -> Rule:
    """Kafka asks for no ACL for this API, for ``reason``."""
    return Rule("none", reason=reason)


def on_cluster(
    operation: Operation,
    *,
    refused: Refusal = top_level_error,
    applies: Callable[[Request], bool] | None = None,
    checks: tuple[Check, ...] = (),
) -> Rule:
    """``operation`` on the cluster, checked before the handler (only for the requests
    ``applies`` selects, if given); a denial is answered by ``refused``. ``checks``: the
    per-resource questions the handler also asks."""
    return Rule("cluster", cluster=operation, refused=refused, applies=applies, checks=checks)


def per_resource(*checks: Check) -> Rule:
    """The per-resource questions the handler asks through the request's guard."""
    return Rule("resources", checks=checks)


@dataclass
class Guard:
    """One request's authorization: the rule of its API, the principal's answers, and
    what the handler asked (for :meth:`verify`)."""

    rule: Rule
    authorizer: Authorizer | None
    principal: str
    host: str
    api_key: int
    asked: set[tuple[ResourceType, Operation, str]] = field(default_factory=set)
    refused: bool = False  # a question was answered no (and audited)

    def allows(self, op: Operation, rtype: ResourceType, name: str, *, audited: bool = True) -> bool:
        """Whether the principal may perform ``op`` on the resource; a denial leaves an
        audit line unless ``audited`` is off (a listing filtered to what may be seen)."""
        if (rtype, op) not in self.rule.declared():
            raise UndeclaredCheckError(
                f"api key {self.api_key} asked about {op.name} on {rtype.name}, which its rule does not declare"
            )
        self.asked.add((rtype, op, name))
        if self.authorizer is None:
            return True
        if self.authorizer.authorize(self.principal, self.host, op, rtype, name):
            return True
        if audited:
            self.refused = True
            self.deny(op, rtype, name)
        return False

    def allows_any(self, op: Operation, rtype: ResourceType) -> bool:
        """Whether ``op`` is allowed on *some* resource of the type (Kafka's
        ``authorizeByResourceType``); asking is declared like :meth:`allows`."""
        if (rtype, op) not in self.rule.declared():
            raise UndeclaredCheckError(f"api key {self.api_key} asked about {op.name} on any {rtype.name}")
        return self.authorizer is None or self.authorizer.authorize_any(self.principal, self.host, op, rtype)

    def deny(self, op: Operation, rtype: ResourceType, name: str) -> None:
        """Write the audit line of a denied request."""
        audit.info(
            "denied %s from %s: %s on %s %r (api key %d)",
            printable(self.principal),
            printable(self.host),
            op.name,
            rtype.name,
            name,
            self.api_key,
        )

    def before(self, request: Request) -> Reply | None:
        """The refusal of a request whose rule's cluster operation is denied (the handler
        is then not called), or ``None``."""
        rule = self.rule
        if rule.cluster is None or self.authorizer is None:
            return None
        if rule.applies is not None and not rule.applies(request):
            return None
        if self.allows(rule.cluster, ResourceType.CLUSTER, CLUSTER_NAME):
            return None
        code = ErrorCode.cluster_authorization_failed
        return rule.refused(request, code, f"{rule.cluster.name} on the cluster is needed")

    def verify(self, request: Request) -> None:
        """Raise :class:`AccessNotEnforcedError` if the request names a resource the principal
        may not use and the handler answered without asking about it. A handler that
        refused something stops asking (a denied group leaves its topics unasked, as in
        Kafka): then the answer is a refusal, and there is nothing to verify."""
        if self.authorizer is None or self.refused:
            return
        for check in self.rule.checks:
            if check.names is None:
                continue
            for name in check.names(request):
                if (check.resource, check.operation, name) in self.asked:
                    continue
                if not self.authorizer.authorize(
                    self.principal, self.host, check.operation, check.resource, name
                ):
                    raise AccessNotEnforcedError(
                        f"api key {self.api_key} answered without checking {check.operation.name} "
                        f"on {check.resource.name} {name!r}"
                    )


def names_of(*path: str) -> Names:
    """The names at ``path`` in a request body: attributes, and lists walked element by
    element (``names_of("topics", "name")``). A missing attribute or a null list gives
    no names (an older version without the field)."""

    def take(request: Request) -> Iterable[str]:
        level: list[Any] = [request.body]
        for attr in path:
            nxt: list[Any] = []
            for item in level:
                value = getattr(item, attr, None)
                if value is None:
                    continue
                if isinstance(value, tuple | list):
                    nxt.extend(value)
                else:
                    nxt.append(value)
            level = nxt
        return [str(v) for v in level if isinstance(v, str)]

    return take


def results_per(*fields: str, key: str, row_key: str, result_list: str = "results") -> Refusal:
    """A refusal that answers each distinct name found at ``fields`` of the request's body
    (lists of entries with a ``key``) with the error, in ``result_list`` rows named by
    ``row_key`` (Kafka's
    ``getErrorResponse`` of the APIs whose response has only per-entry results)."""

    def refuse(request: Request, code: int, message: str) -> Reply:
        names: dict[str, None] = {}
        for f in fields:
            for entry in getattr(request.body, f, None) or ():
                names.setdefault(getattr(entry, key))
        rows: list[Mapping[str, Any]] = [
            {row_key: n, "error_code": code, "error_message": message} for n in names
        ]
        return {"error_code": code, "error_message": message, result_list: rows}

    return refuse


__all__ = [
    "AccessNotEnforcedError",
    "Check",
    "Guard",
    "Rule",
    "UndeclaredCheckError",
    "audit",
    "names_of",
    "no_acl",
    "on_cluster",
    "per_resource",
    "printable",
    "results_per",
    "top_level_error",
]
