"""Authentication and authorization of the HTTP API, with the broker's users and ACLs.

**Authentication** (when :attr:`HttpSecurity.credentials` is set, ``--http-auth``):
every route but ``/api/v1/health``, the console's static pages, the schema and (unless
``--metrics-auth``) ``/metrics`` needs an ``Authorization`` header:

* ``Basic`` with a SCRAM user's name and password, checked as SASL/PLAIN checks it
  (salted with the stored salt and iterations, compared in constant time). A password
  must not cross the network in clear, so Basic is refused over plain HTTP unless the
  server was told otherwise (``--http-basic-without-tls``, which ``serve`` accepts only
  for a loopback ``--http`` address);
* ``Bearer`` with a token of ``logtrove tokens create`` (:mod:`logtrove.acl.tokens`),
  which acts as its user while the token and the user exist.

A missing or wrong credential is a 401 problem with ``WWW-Authenticate``.

**Authorization** (when :attr:`HttpSecurity.authorizer` is set, ``--authorizer``): the
principal (``User:alice``, or ``User:ANONYMOUS`` without authentication) needs Kafka's
operation on the resource a route touches (:data:`RULES`): READ on the topic to read
messages (search, histogram, tail, tags), DESCRIBE to describe it, DESCRIBE_CONFIGS /
ALTER_CONFIGS for its configs, WRITE to produce, CREATE (on the cluster or the topic)
to create one, DESCRIBE on a group for its lag, ALTER on it to change its tag
subscriptions. Listings leave out what the principal may not describe. A route with no
rule is refused, so a new route cannot be open by mistake. A denial is a 403 problem and
a line on the ``logtrove.audit`` logger, as the broker's.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import logging
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request

from logtrove.acl import ANONYMOUS, CLUSTER_NAME, Authorizer, Operation, ResourceType
from logtrove.acl.credentials import CredentialError, CredentialStore
from logtrove.acl.tokens import TokenError, TokenStore
from logtrove.http.problems import PROBLEM_JSON, Problem

audit = logging.getLogger("logtrove.audit")

REALM = "logtrove"
OPEN_ROUTES = frozenset({"/api/v1/health", "/", "/ui", "/ui/", "/ui/{view:path}"})
METRICS_ROUTE = "/metrics"
MAX_BASIC_CHARS = 2048

_T, _G, _C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
Check = tuple[Operation, ResourceType, str | None]  # the path parameter naming it; None: the cluster

RULES: dict[tuple[str, str], tuple[Check, ...]] = {
    ("GET", "/metrics"): ((Operation.DESCRIBE, _C, None),),
    ("GET", "/api/v1/topics"): (),  # filtered: topics the principal may describe
    ("POST", "/api/v1/topics"): (),  # CREATE on the cluster or the topic, checked by the route
    ("GET", "/api/v1/topics/{topic}"): ((Operation.DESCRIBE, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/configs"): ((Operation.DESCRIBE_CONFIGS, _T, "topic"),),
    ("PATCH", "/api/v1/topics/{topic}/configs"): ((Operation.ALTER_CONFIGS, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/partitions"): ((Operation.DESCRIBE, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/partitions/{partition}"): ((Operation.DESCRIBE, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/histogram"): ((Operation.READ, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/partitions/{partition}/offsets/{offset}"): (
        (Operation.READ, _T, "topic"),
    ),
    ("GET", "/api/v1/messages/{position_id}"): (),  # READ on the topic the ID names, checked by the route
    ("GET", "/api/v1/topics/{topic}/partitions/{partition}/offsets/{offset}/neighbours"): (
        (Operation.READ, _T, "topic"),
    ),
    ("GET", "/api/v1/topics/{topic}/partitions/{partition}/messages"): ((Operation.READ, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/messages/at"): ((Operation.READ, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/messages/range"): ((Operation.READ, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/messages/by-key"): ((Operation.READ, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/messages/by-header"): ((Operation.READ, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/messages/by-id"): ((Operation.READ, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/messages/search"): ((Operation.READ, _T, "topic"),),
    ("POST", "/api/v1/topics/{topic}/messages"): ((Operation.WRITE, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/tail"): ((Operation.READ, _T, "topic"),),
    ("GET", "/api/v1/groups"): (),  # filtered: groups the principal may describe
    ("GET", "/api/v1/topics/{topic}/groups"): ((Operation.DESCRIBE, _T, "topic"),),  # and filtered
    ("GET", "/api/v1/groups/{group}"): ((Operation.DESCRIBE, _G, "group"),),
    ("PUT", "/api/v1/groups/{group}/subscriptions/{topic}"): (
        (Operation.ALTER, _G, "group"),
        (Operation.DESCRIBE, _T, "topic"),
    ),
    ("DELETE", "/api/v1/groups/{group}/subscriptions/{topic}"): ((Operation.ALTER, _G, "group"),),
    ("GET", "/api/v1/groups/{group}/lag-history"): ((Operation.DESCRIBE, _G, "group"),),
    ("GET", "/api/v1/compaction"): (),  # filtered: topics the principal may describe
    ("GET", "/api/v1/topics/{topic}/compaction"): ((Operation.DESCRIBE, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/partitions/{partition}/tags/fetch"): ((Operation.READ, _T, "topic"),),
    ("GET", "/api/v1/topics/{topic}/partitions/{partition}/tags/count"): ((Operation.READ, _T, "topic"),),
}


@dataclass
class HttpSecurity:
    """How the app authenticates and authorizes (the default: neither, as ``make run``)."""

    credentials: CredentialStore | None = None  # set: every non-open route needs a credential
    tokens: TokenStore | None = None
    authorizer: Authorizer | None = None
    tls: bool = False  # the server speaks HTTPS
    basic_without_tls: bool = False  # accept Basic over plain HTTP (loopback only, by the CLI)
    metrics_auth: bool = False  # /metrics needs a credential (and CLUSTER DESCRIBE) too
    follow_acls: bool = False  # re-read acls.json when it changes (another process writes it)
    allowed_hosts: tuple[str, ...] = ()  # Host names served besides the local ones (logtrove.http.origin)


@dataclass(frozen=True)
class Caller:
    principal: str
    host: str


CONSOLE_HEADER = "x-requested-with"  # the console's requests carry it (any value)


def _unauthorized(request: Request, sec: HttpSecurity, detail: str) -> Problem:
    """A 401 whose challenge names the schemes the request could use. A Basic challenge
    makes browsers prompt for a password even for a script's request, so the console
    (``X-Requested-With``) is offered Bearer only, as is everyone where Basic is refused.
    A refused credential (not a missing one) leaves an audit line."""
    if "authorization" in request.headers:  # a credential was offered and refused
        audit.info(
            "failed authentication from %s: %s (http %s %s)",
            request.client.host if request.client else "?",
            detail,
            request.method,
            request.url.path,
        )
    basic = (sec.tls or sec.basic_without_tls) and CONSOLE_HEADER not in request.headers
    challenge = (f'Basic realm="{REALM}", ' if basic else "") + f'Bearer realm="{REALM}"'
    return Problem(401, "unauthorized", "Unauthorized", detail, headers={"WWW-Authenticate": challenge})


def _basic_user(request: Request, sec: HttpSecurity, credentials: CredentialStore, value: str) -> str:
    if not (sec.tls or sec.basic_without_tls):
        raise _unauthorized(request, sec, "Basic authentication needs HTTPS here; use a bearer token or TLS")
    try:
        decoded = base64.b64decode(value.strip()[:MAX_BASIC_CHARS], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise _unauthorized(request, sec, "malformed Basic credentials") from None
    user, sep, password = decoded.partition(":")
    if not sep or not user:
        raise _unauthorized(request, sec, "malformed Basic credentials")
    try:
        ok = credentials.check_password(user, password)
    except CredentialError:
        ok = False  # an unreadable credentials file lets nobody in
    if not ok:
        raise _unauthorized(request, sec, "wrong user name or password")
    return user


def authenticate(request: Request, sec: HttpSecurity) -> str:
    """The principal of the request's ``Authorization`` header (401 problem if none)."""
    credentials = sec.credentials
    if credentials is None:
        return ANONYMOUS
    header = request.headers.get("authorization")
    if header is None:
        raise _unauthorized(request, sec, "this server needs credentials: HTTP Basic or a bearer token")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "basic":
        return "User:" + _basic_user(request, sec, credentials, value)
    if scheme.lower() == "bearer" and sec.tokens is not None:
        try:
            user = sec.tokens.user_of(value.strip())
        except TokenError:
            user = None
        if user is None or not _user_exists(credentials, user):
            raise _unauthorized(request, sec, "unknown or revoked token")
        return "User:" + user
    raise _unauthorized(request, sec, "unsupported authorization scheme (Basic or Bearer)")


def _user_exists(credentials: CredentialStore, user: str) -> bool:
    try:
        return bool(credentials.users().get(user))
    except CredentialError:
        return False


def caller_of(request: Request) -> Caller:
    caller: Caller | None = getattr(request.state, "caller", None)
    if caller is None:  # a route outside the guard (none today)
        host = request.client.host if request.client else "*"
        return Caller(ANONYMOUS, host)
    return caller


def allowed(request: Request, op: Operation, rtype: ResourceType, name: str, *, audited: bool = True) -> bool:
    """Whether the request's principal may do ``op`` on the resource (always, without an
    authorizer). A denial is audited unless ``audited`` is off (filtering a listing)."""
    sec: HttpSecurity = request.app.state.security
    if sec.authorizer is None:
        return True
    if sec.follow_acls:
        sec.authorizer.store.reload_if_changed()
    caller = caller_of(request)
    if sec.authorizer.authorize(caller.principal, caller.host, op, rtype, name):
        return True
    if audited:
        audit.info(
            "denied %s from %s: %s on %s %r (http %s %s)",
            caller.principal,
            caller.host,
            op.name,
            rtype.name,
            name,
            request.method,
            request.url.path,
        )
    return False


def require(request: Request, op: Operation, rtype: ResourceType, name: str) -> None:
    """A 403 problem unless :func:`allowed`."""
    if not allowed(request, op, rtype, name):
        raise Problem(
            403,
            "forbidden",
            "Forbidden",
            f"{caller_of(request).principal} may not {op.name} {rtype.name.lower()} {name!r}",
        )


def still_allowed(request: Request, op: Operation, rtype: ResourceType, name: str) -> bool:
    """For a response that lasts (a live tail): whether its credential is still valid (a
    token not revoked, a password not changed) and its principal still has ``op``."""
    sec: HttpSecurity = request.app.state.security
    try:
        if sec.credentials is not None:
            authenticate(request, sec)
    except Problem:
        return False
    return allowed(request, op, rtype, name)


def guard(request: Request) -> None:
    """FastAPI dependency of every route: authenticate, then check the route's rule."""
    sec: HttpSecurity = request.app.state.security
    route = str(getattr(request.scope.get("route"), "path", ""))
    host = request.client.host if request.client else "*"
    if route in OPEN_ROUTES or (route == METRICS_ROUTE and not sec.metrics_auth):
        request.state.caller = Caller(ANONYMOUS, host)
        return
    request.state.caller = Caller(authenticate(request, sec), host)
    if sec.authorizer is None:
        return
    rule = RULES.get((request.method if request.method != "HEAD" else "GET", route))
    if rule is None:
        require(request, Operation.ALL, _C, CLUSTER_NAME)  # unknown to the rules: super users only
        return
    for op, rtype, param in rule:
        require(request, op, rtype, CLUSTER_NAME if param is None else str(request.path_params[param]))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is the loopback interface."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def document_security(app: FastAPI, sec: HttpSecurity) -> None:
    """Make the OpenAPI schema (and so ``/docs``' "Authorize" button) say how to
    authenticate, and which answers authentication and authorization add. Called after
    :func:`~logtrove.http.problems.document_problems`, whose schema it extends."""
    if sec.credentials is None and sec.authorizer is None:
        return
    base = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = base()
        problem = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/ProblemModel"}}}
        if sec.credentials is not None:
            schema["components"]["securitySchemes"] = {
                "basic": {"type": "http", "scheme": "basic", "description": "A `logtrove users` user."},
                "bearer": {"type": "http", "scheme": "bearer", "description": "`logtrove tokens create`."},
            }
        for path, operations in schema.get("paths", {}).items():
            if path in OPEN_ROUTES or (path == METRICS_ROUTE and not sec.metrics_auth):
                continue
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                if sec.credentials is not None:
                    operation["security"] = [{"basic": []}, {"bearer": []}]
                    responses["401"] = {"description": "Missing or wrong credentials", "content": problem}
                if sec.authorizer is not None:
                    responses["403"] = {"description": "Not allowed by the ACLs", "content": problem}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
