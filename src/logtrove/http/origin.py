"""Host and Origin checks of every request: the defence against DNS rebinding and
cross-site requests, on even when the API needs no credentials (``make run``).

A web page the user visits can make the browser send requests to the API: to another
origin (``http://127.0.0.1:8080`` from ``http://attacker.example``), where the browser
sends the request but hides the answer, or, after pointing its own name at 127.0.0.1
(DNS rebinding), to its own origin, where it reads the answer too. Two checks, in one
ASGI middleware (:class:`SameOrigin`) that :func:`~logtrove.http.app.create_app`
installs in front of every route, stop both:

* **Host** (every request): the ``Host`` header must be a name the server is reachable
  by (:class:`HostPolicy`): ``localhost``, ``*.localhost``, ``127.0.0.1``, ``[::1]``, the
  address it listens on, the machine's host name, and the names it was given
  (``--http-allowed-host``, and for ``serve`` the hosts of ``--advertise``). A server
  bound to every interface (``0.0.0.0``, ``::``) also takes any IP address: a page
  cannot rebind an address, only a name. Anything else is a 421 problem naming the
  option to use. A rebinding page sends its own name as the Host, so it ends here.
* **Origin** (state-changing methods: POST, PUT, PATCH, DELETE): a browser names the
  page that made the request in ``Origin`` (or, from older browsers, ``Referer``).
  When it is given, its host and port must be the request's Host (its port defaulting
  to the Origin's scheme's, so a TLS-terminating proxy in front still matches);
  otherwise a 403 problem. ``Origin: null`` (a sandboxed frame, a ``file:`` page) is
  refused too. Without either header the request is not a browser's (curl, a script's
  HTTP client), which a web page cannot send, and passes; credentials and ACLs are the
  defence against those (``--http-auth``, ``--authorizer``).

The web console is served by the API itself, so its requests are same-origin and pass.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from logtrove.http.problems import Problem, ProblemJSONResponse, problem_body

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})  # the addresses of a bind to every interface
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ALLOWED_HOST_OPTION = "--http-allowed-host"
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class HostNameError(ValueError):
    """An allowed-host setting that is not a host name or address."""


def normalize_host(name: str) -> str:
    """A configured host name, lower case, without brackets; ``*.example.com`` allows
    every name under ``example.com``. Raises :class:`HostNameError` for anything that
    is not a DNS name or an IP address (a port, a scheme, a path, a space)."""
    text = name.strip().lower()
    if text.startswith("[") and text.endswith("]") and _is_ip(text[1:-1]):
        return text[1:-1]
    if _is_ip(text):
        return text
    pattern = text.startswith("*.")
    bare = text.removeprefix("*.").rstrip(".")
    if not bare or len(bare) > 253 or not all(_is_label(label) for label in bare.split(".")):
        raise HostNameError(f"{name!r} is not a host name (such as logs.example.com or *.example.com)")
    return ("*." if pattern else "") + bare


def _is_label(label: str) -> bool:
    return 0 < len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum() and label.isascii()


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def split_host(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` header's name (lower case, no brackets) and port, or None if malformed."""
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[1:end], text[end + 1 :]
        if not _is_ip(name):
            return None
    else:
        name, sep, port = text.partition(":")
        rest = sep + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit() and int(rest[1:]) <= 65535):
        return None
    if not name:
        return None
    return name.rstrip("."), int(rest[1:]) if rest else None


@dataclass(frozen=True)
class HostPolicy:
    """The ``Host`` names a server accepts: see the module's docstring.

    ``listen_host`` is the address it is bound to; ``names`` are the configured ones
    (normalised by :func:`normalize_host`)."""

    listen_host: str = "127.0.0.1"
    names: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, listen_host: str, names: Iterable[str] = ()) -> HostPolicy:
        return cls(listen_host.strip("[]").lower(), frozenset(normalize_host(n) for n in names))

    @property
    def wildcard(self) -> bool:
        return self.listen_host in WILDCARDS

    def allows(self, name: str) -> bool:
        """Whether a request whose Host is ``name`` (from :func:`split_host`) is served."""
        if name in LOCAL_NAMES or name.endswith(".localhost") or name == self.listen_host:
            return True
        if name in self.names or any(p.startswith("*.") and name.endswith(p[1:]) for p in self.names):
            return True
        if name == _machine_name():
            return True
        return self.wildcard and _is_ip(name)


def _machine_name() -> str:
    try:
        return socket.gethostname().lower()
    except OSError:  # pragma: no cover - gethostname does not fail on Linux
        return "localhost"


def _header(scope: Scope, wanted: bytes) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name.lower() == wanted:
            return value.decode("latin-1")
    return None


def same_origin(origin: str, host: str, port: int | None) -> bool:
    """Whether the page ``origin`` (an ``Origin`` or ``Referer`` value) is the server the
    request's Host names (``host``, ``port``)."""
    try:
        parts = urlsplit(origin.strip())
        origin_port = parts.port
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return False
    default = _DEFAULT_PORTS[scheme]
    return parts.hostname.lower().rstrip(".") == host and (origin_port or default) == (port or default)


class SameOrigin:
    """ASGI middleware: the Host check of every request and the Origin check of every
    state-changing one (see the module's docstring)."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the app serves no websockets; lifespan has no Host
            await self.app(scope, receive, send)
            return
        problem = self.check(scope)
        if problem is None:
            await self.app(scope, receive, send)
            return
        response = ProblemJSONResponse(
            problem_body(problem, str(scope.get("path", ""))), status_code=problem.status
        )
        await response(scope, _no_receive, send)

    def check(self, scope: Scope) -> Problem | None:
        """The problem that refuses the request, or None to serve it."""
        raw_host = _header(scope, b"host")
        host = None if raw_host is None else split_host(raw_host)
        if host is None:
            return Problem(
                400, "bad-host", "Bad Host header", f"malformed or missing Host header {raw_host!r}"
            )
        name, port = host
        if not self.policy.allows(name):
            return Problem(
                421,
                "unknown-host",
                "Unknown host",
                f"this server does not answer to the host name {name!r} (a page that pointed "
                f"its own name at this server would send one); if it is reachable by that name, "
                f"start it with {ALLOWED_HOST_OPTION} {name}",
            )
        if scope.get("method", "GET").upper() not in STATE_CHANGING:
            return None
        page = _header(scope, b"origin")
        what = "Origin"
        if page is None:
            page, what = _header(scope, b"referer"), "Referer"
        if page is None or same_origin(page, name, port):
            return None
        return Problem(
            403,
            "cross-origin",
            "Cross-origin request refused",
            f"a {scope.get('method')} from the page {page!r} ({what}) is not from this server "
            f"({raw_host}); pages of other sites may not change data here. Send it from the "
            f"console of this server, or from a client that is not a browser",
        )


async def _no_receive() -> Message:  # pragma: no cover - a plain response never receives
    return {"type": "http.disconnect"}
