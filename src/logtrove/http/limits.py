"""The request body limit, enforced while the body is read.

Starlette reads a body whole before a route sees it, so a limit checked by the route
comes after the memory is spent (a 200 MB POST took the broker to 1 GB). This ASGI
middleware sits in front of everything: a ``Content-Length`` over the limit is answered
at once, unread; a chunked (or under-declared) body is counted chunk by chunk as the app
receives it, and the request ends with 413 as soon as the count passes the limit. Either
way the answer is an RFC 7807 problem and the connection is closed, so the unread rest
of the body is never buffered. uvicorn itself holds at most its flow-control window
(64 KiB) of a body the app has not asked for yet.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from logtrove.clock import ascii_int
from logtrove.http.problems import Problem, ProblemJSONResponse, problem_body

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""16 MiB: a REST produce request fills several partitions' 1 MiB batches (base64 and
JSON make it bigger than the records); every other body is a few hundred bytes."""


class BodyLimit:
    """ASGI middleware refusing request bodies over ``max_bytes`` while reading them.

    Past the limit it sends the 413 itself and tells the app the client went away
    (``http.disconnect``), so the app stops reading whatever way it reads; what the app
    answers to that is dropped.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send, f"the body declares {declared} bytes")
            return
        seen = 0
        started = refused = False

        async def counting_receive() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    refused = True
                    if not started:
                        await self._refuse(scope, send, f"the body passed {self.max_bytes} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counting_receive, guarded_send)

    async def _refuse(self, scope: Scope, send: Send, what: str) -> None:
        problem = Problem(
            413,
            "body-too-large",
            "Request body too large",
            f"{what}; this server accepts at most {self.max_bytes} bytes per request body "
            "(split the records over several requests)",
        )
        response = ProblemJSONResponse(
            problem_body(problem, str(scope.get("path", ""))),
            status_code=413,
            headers={"Connection": "close"},
        )
        await response(scope, _no_receive, send)


async def _no_receive() -> Message:  # pragma: no cover - a plain response never receives
    return {"type": "http.disconnect"}


def _content_length(scope: Scope) -> int | None:
    """The request's ``Content-Length`` if it is one well-formed number."""
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name.lower() == b"content-length":
            text = value.decode("latin-1").strip()
            return ascii_int(text)
    return None
