"""The FastAPI application: the JSON API under ``/api/v1``, ``/metrics``, and the console.

::

    /api/v1/health                    liveness, version, read-only or not
    /api/v1/topics[/{topic}]          list, create, describe, configs
    /api/v1/topics/{t}/partitions     offsets, sizes, segments
    /api/v1/topics/{t}/histogram      records per time bucket (time index + batch headers)
    /api/v1/topics/{t}/…/messages     find messages (offset, time, range, ID, key, header, content)
    /api/v1/topics/{t}/messages POST  produce (REST proxy style)
    /api/v1/topics/{t}/tail           follow new records (server-sent events)
    /api/v1/groups[/{group}]          consumer groups and lag
    /api/v1/groups/{g}/lag-history    lag over time (sampled by the server)
    /api/v1/topics/{t}/…/tags/…       tag-filtered fetch and exact tag counts (.tagidx)
    /api/v1/compaction                compaction status
    /metrics                          Prometheus text format
    /ui/…                             the web console (static files, no build step)
    /openapi.json, /docs              the schema and its browser

The app is thin: every answer comes from storage, query and groups; this package only
validates input, shapes output and maps errors to RFC 7807 problems.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from logtrove import __version__
from logtrove.http import console
from logtrove.http.api import (
    compaction,
    groups,
    health,
    histogram,
    messages,
    produce,
    search,
    tags,
    topics,
)
from logtrove.http.api import lag_history as lag_history_api
from logtrove.http.api import tail as tail_api
from logtrove.http.context import Appender, HttpContext
from logtrove.http.groups import GroupsSource, GroupStates
from logtrove.http.lag_history import DEFAULT_WINDOW_S, LagHistory, LagSampler
from logtrove.http.limits import DEFAULT_MAX_BODY_BYTES, BodyLimit
from logtrove.http.origin import HostPolicy, SameOrigin
from logtrove.http.problems import document_problems, install_handlers
from logtrove.http.security import HttpSecurity, document_security, guard
from logtrove.http.tail import TailHub, TailLimits
from logtrove.query import QueryEngine
from logtrove.storage import Storage

SEARCH_TIME_LIMIT_S = 30.0
"""How long one content search may run: searches run in worker threads of the broker's
process, and a question with ``budget_mb=0`` would otherwise read every byte."""

DESCRIPTION = """\
Find any message of a logtrove data directory — by offset, time, range, message ID,
key, header or content — and watch topics, consumer lag and compaction.

Errors are RFC 7807 `application/problem+json` documents. Times are epoch
milliseconds or ISO-8601. Keys and values are UTF-8 text, or base64 in
`key_b64` / `value_b64` when they are not.
"""


def create_app(
    storage: Storage,
    *,
    appender: Appender | None = None,
    group_states: GroupStates | None = None,
    allow_writes: bool | None = None,
    refresh_interval_s: float = 1.0,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    search_time_limit_s: float = SEARCH_TIME_LIMIT_S,
    tail_limits: TailLimits | None = None,
    lag_sample_interval_s: float | None = None,
    lag_history_window_s: float = DEFAULT_WINDOW_S,
    security: HttpSecurity | None = None,
    listen_host: str = "127.0.0.1",
) -> FastAPI:
    """Build the app over an open :class:`Storage` (which the caller keeps and closes).

    ``appender`` routes REST produce through a broker's writer; ``group_states`` adds
    a broker's live group states; ``allow_writes`` defaults to "the storage is writable".
    Request bodies over ``max_body_bytes`` get 413 while they are read (see
    :mod:`logtrove.http.limits`); a content search ends after ``search_time_limit_s``
    with reason "budget exhausted" and a cursor to continue. ``tail_limits`` bounds the
    live tails (:mod:`logtrove.http.tail`); the server closes them at shutdown.
    With ``lag_sample_interval_s`` (and a writable storage) a thread samples every group's
    lag into ``lag-history.jsonl`` (:mod:`logtrove.http.lag_history`) until :func:`close`.
    ``security`` turns on authentication and authorization (:mod:`logtrove.http.security`);
    every route depends on its guard. Every request passes the Host and Origin checks of
    :mod:`logtrove.http.origin` first (with the names the server listens on,
    ``listen_host``, and those of ``security.allowed_hosts``), whatever the security.
    """
    app = FastAPI(
        title="logtrove",
        version=__version__,
        description=DESCRIPTION,
        docs_url="/docs",
        redoc_url=None,
        dependencies=[Depends(guard)],
    )
    app.state.security = security or HttpSecurity()
    app.state.ctx = HttpContext(
        storage, appender=appender, refresh_interval_s=refresh_interval_s, allow_writes=allow_writes
    )
    app.state.groups = GroupsSource(storage, states=group_states, reload_interval_s=refresh_interval_s)
    app.state.engine = QueryEngine(storage, content_time_limit_s=search_time_limit_s)
    app.state.tails = TailHub(tail_limits)
    app.state.lag_history = LagHistory(storage.path, window_s=lag_history_window_s)
    app.state.lag_sampler = None
    if lag_sample_interval_s is not None and not storage.read_only:
        app.state.lag_sampler = LagSampler(
            app.state.groups, app.state.lag_history, storage.clock, lag_sample_interval_s
        ).start()
    app.state.features = {
        "query": True,
        "groups": True,
        "lag": True,
        "tag_lag": True,
        "auth": app.state.security.credentials is not None,  # the console shows "Log in" only then
    }
    install_handlers(app)
    document_problems(app)
    document_security(app, app.state.security)
    for module in (
        health,
        topics,
        histogram,
        messages,
        search,
        produce,
        tail_api,
        groups,
        lag_history_api,
        compaction,
        tags,
    ):
        app.include_router(module.router)
    console.install(app)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    # in front of the body limit: a refused request's body is never read
    app.add_middleware(SameOrigin, policy=HostPolicy.of(listen_host, app.state.security.allowed_hosts))
    _count_requests(app)  # outside the body limit, so that its 413s are counted
    return app


def close(app: FastAPI) -> None:
    """End what the app runs besides requests: its live tails and its lag sampler (the
    server calls this as it shuts down)."""
    app.state.tails.close()
    if app.state.lag_sampler is not None:
        app.state.lag_sampler.stop()


def _route_template(scope: Scope) -> str:
    """The matched route's path template (``/api/v1/topics/{topic}``), so that metrics
    do not get one series per topic name."""
    route = scope.get("route")
    return str(getattr(route, "path", "unmatched"))


def _count_requests(app: FastAPI) -> None:
    app.add_middleware(RequestCounter, ctx=app.state.ctx)


class RequestCounter:
    """Counts every answered request by method, route and status, when its response starts.

    A plain ASGI middleware, not ``@app.middleware("http")``: Starlette's
    BaseHTTPMiddleware runs the app in a task of its own, and cancelled a streaming
    response (the live tail's server-sent events) right after its first event, at random."""

    def __init__(self, app: ASGIApp, ctx: HttpContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.ctx.requests.add(scope["method"], _route_template(scope), int(message["status"]))
            await send(message)

        await self.app(scope, receive, counting_send)
