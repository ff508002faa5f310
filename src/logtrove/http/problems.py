"""Errors as RFC 7807 ``application/problem+json`` documents.

Every error the API returns has this shape (extension members such as
``log_start_offset`` or ``errors`` are added where they help)::

    {"type": "urn:logtrove:problem:unknown-topic", "title": "Unknown topic",
     "status": 404, "detail": "unknown topic 'orders'", "instance": "/api/v1/topics/orders"}

Library errors are mapped here, once, by type (:data:`_STORAGE_PROBLEMS`); route code
raises them or :class:`Problem` and never builds error responses by hand. Anything
unexpected becomes a 500 problem with no internals in it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from logtrove.query import HistogramTimeoutError, InvalidQueryError, MessageNotFoundError, QueryError
from logtrove.records import RecordsError
from logtrove.storage import (
    DataDirError,
    FollowedTopicChangeError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RecordTooLargeError,
    StorageError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)

PROBLEM_JSON = "application/problem+json"
_log = logging.getLogger("logtrove.http")


class ProblemModel(BaseModel):
    """An RFC 7807 problem document (for the OpenAPI schema)."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None


class Problem(Exception):  # noqa: N818 - the RFC's name for it
    """An error response: ``raise Problem(404, "unknown-group", "Unknown group", "…")``."""

    def __init__(
        self,
        status: int,
        kind: str,
        title: str,
        detail: str,
        extra: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.headers = dict(headers or {})  # response headers, such as WWW-Authenticate
        self.status = status
        self.kind = kind
        self.title = title
        self.detail = detail
        self.extra = dict(extra or {})


def bad_request(detail: str, kind: str = "invalid-parameter") -> Problem:
    """A 422 for input that is well-formed but not acceptable (the caller can fix it)."""
    return Problem(422, kind, "Invalid parameter", detail)


# The first matching class wins, so subclasses come before their bases.
_STORAGE_PROBLEMS: tuple[tuple[type[Exception], int, str, str], ...] = (
    (InvalidQueryError, 422, "invalid-query", "Invalid query"),
    (MessageNotFoundError, 404, "no-message", "No message"),
    (HistogramTimeoutError, 503, "too-slow", "Took too long"),
    (QueryError, 500, "query-failed", "Query failed"),
    (UnknownTopicError, 404, "unknown-topic", "Unknown topic"),
    (UnknownPartitionError, 404, "unknown-partition", "Unknown partition"),
    (TopicExistsError, 409, "topic-exists", "Topic already exists"),
    (InvalidTopicError, 422, "invalid-topic", "Invalid topic"),
    (FollowedTopicChangeError, 409, "followed-topic", "Mirrored topic"),
    (InvalidConfigError, 422, "invalid-config", "Invalid topic config"),
    (OffsetOutOfRangeError, 422, "offset-out-of-range", "Offset out of range"),
    (RecordTooLargeError, 413, "record-too-large", "Records too large"),
    (InvalidRecordError, 422, "invalid-record", "Invalid record"),
    (ReadOnlyError, 403, "read-only", "Read-only"),
    (DataDirError, 503, "data-dir", "Data directory unavailable"),
    (RecordsError, 422, "invalid-record", "Invalid record"),
    (StorageError, 500, "storage-error", "Storage error"),
)


def problem_from_exception(exc: Exception) -> Problem | None:
    """The problem for a library error, or ``None`` when it is not one of ours."""
    if isinstance(exc, Problem):
        return exc
    for cls, status, kind, title in _STORAGE_PROBLEMS:
        if isinstance(exc, cls):
            extra: dict[str, Any] = {}
            if isinstance(exc, OffsetOutOfRangeError):
                extra = {"log_start_offset": exc.log_start_offset, "log_end_offset": exc.log_end_offset}
            return Problem(status, kind, title, str(exc), extra)
    return None


class ProblemJSONResponse(JSONResponse):
    """``application/problem+json``, rendered with non-ASCII characters escaped: a detail
    that quotes hostile text (a lone surrogate) cannot make the error answer fail too."""

    media_type = PROBLEM_JSON

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


def problem_body(problem: Problem, instance: str) -> dict[str, Any]:
    """The RFC 7807 document of ``problem`` for the resource ``instance``."""
    return {
        "type": f"urn:logtrove:problem:{problem.kind}",
        "title": problem.title,
        "status": problem.status,
        "detail": problem.detail,
        "instance": instance,
        **problem.extra,
    }


def problem_response(problem: Problem, request: Request) -> JSONResponse:
    headers = dict(problem.headers)
    if "allow" in problem.extra:
        headers["Allow"] = problem.extra["allow"]
    return ProblemJSONResponse(
        problem_body(problem, request.url.path), status_code=problem.status, headers=headers
    )


def _validation_detail(errors: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    items = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        where = ".".join(loc[1:]) if len(loc) > 1 else ".".join(loc)
        items.append({"location": loc[0] if loc else "", "field": where, "message": str(err.get("msg"))})
    first = items[0] if items else {"location": "", "field": "", "message": "invalid request"}
    more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
    return f"{first['location']} {first['field']!r}: {first['message']}{more}", items


def install_handlers(app: FastAPI) -> None:
    """Make every error of ``app`` a problem+json response."""

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail, items = _validation_detail(list(exc.errors()))
        return problem_response(
            Problem(422, "validation", "Invalid request", detail, {"errors": items}), request
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not-found", 405: "method-not-allowed"}.get(exc.status_code, "http-error")
        title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "HTTP error")
        detail = exc.detail if isinstance(exc.detail, str) else title
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no such resource: {request.url.path}"
        extra = {"allow": exc.headers["Allow"]} if exc.headers and "Allow" in exc.headers else None
        return problem_response(Problem(exc.status_code, kind, title, detail, extra), request)

    async def _library(request: Request, exc: Exception) -> JSONResponse:
        problem = problem_from_exception(exc) or _internal()
        if problem.status >= 500:
            _log.error("error serving %s %s", request.method, request.url.path, exc_info=exc)
        return problem_response(problem, request)

    for cls in (Problem, StorageError, RecordsError, QueryError):
        app.add_exception_handler(cls, _library)

    @app.exception_handler(Exception)
    async def _any(request: Request, exc: Exception) -> JSONResponse:
        _log.error("error serving %s %s", request.method, request.url.path, exc_info=exc)
        return problem_response(_internal(), request)


def _internal() -> Problem:
    return Problem(500, "internal", "Internal error", "the server failed to answer; see its log")


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries documenting problem+json answers."""
    return {
        status: {"model": ProblemModel, "content": {PROBLEM_JSON: {}}, "description": "Problem (RFC 7807)"}
        for status in statuses
    }


def document_problems(app: FastAPI) -> None:
    """Make the OpenAPI schema say what the API does: every 4xx/5xx answer is
    problem+json (FastAPI documents its own ``HTTPValidationError`` JSON otherwise)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.pop("HTTPValidationError", None)
            components.pop("ValidationError", None)
            components["ProblemModel"] = ProblemModel.model_json_schema()
            problem = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/ProblemModel"}}}
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    responses = operation.setdefault("responses", {})
                    if operation.get("parameters") or operation.get("requestBody"):
                        responses.setdefault("422", {"description": "Invalid request"})
                    if operation.get("requestBody"):
                        responses.setdefault("400", {"description": "Body is not readable JSON"})
                    for status, response in responses.items():
                        if status[0] in "45":
                            response["content"] = problem
                            response.setdefault("description", "Problem (RFC 7807)")
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
