"""The HTTP API and web console (FastAPI): find messages, watch topics, lag and compaction.

Public API: :func:`create_app` (an app over an open :class:`~logtrove.storage.Storage`),
:func:`run` (serve in the foreground) and :func:`start_in_thread` (serve next to a broker).
http/ is thin: answers come from storage, query and groups; this package validates
input, shapes output and turns errors into RFC 7807 problems (:mod:`.problems`).
"""

from logtrove.http.app import create_app
from logtrove.http.context import Appender
from logtrove.http.groups import GroupState, GroupStates
from logtrove.http.problems import Problem
from logtrove.http.security import HttpSecurity
from logtrove.http.server import (
    HttpServer,
    HttpTls,
    ListenAddressError,
    next_to_broker,
    parse_listen,
    run,
    start_in_thread,
)

__all__ = [
    "Appender",
    "GroupState",
    "GroupStates",
    "HttpSecurity",
    "HttpServer",
    "HttpTls",
    "ListenAddressError",
    "Problem",
    "create_app",
    "next_to_broker",
    "parse_listen",
    "run",
    "start_in_thread",
]
