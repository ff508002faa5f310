"""The broker's HTTP API as a client: JSON GETs with the standard library, every
answer checked to come from the cluster the Kafka side talks to.

The Kafka protocol has no tag filter, so tag counts and filtered records come from the
broker's HTTP API, which filters next to the data with ``.tagidx``
(:mod:`logtrove.http.api.tags`). Every HTTP answer carries the broker's cluster ID,
checked against the Kafka side's, so records never come from one broker while commits
go to another.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from logtrove.client.errors import HttpApiError
from logtrove.groups.lag import TagMatches
from logtrove.groups.tags import TagFilter
from logtrove.records import Record

DEFAULT_HTTP_PORT = 8080
MAX_RECORDS_PER_FETCH = 10_000  # the endpoint's limit


def http_url(bootstrap: str, http: str | None) -> str:
    """The base URL of the API: ``http`` (``http://`` added to a bare ``HOST:PORT``), or
    the bootstrap host on port 8080 (``logtrove serve``'s default)."""
    if http is None:
        host = bootstrap.strip().rpartition(":")[0] or "127.0.0.1"
        return f"http://{host}:{DEFAULT_HTTP_PORT}"
    url = http.strip()
    return (url if "://" in url else f"http://{url}").rstrip("/")


class HttpApi:
    """GET requests to the broker's JSON API (the standard library's client); with
    ``cluster_id``, answers from another cluster are refused."""

    def __init__(self, url: str, *, cluster_id: str | None = None, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.cluster_id = cluster_id
        self.timeout_s = timeout_s

    def get(self, path: str, params: Mapping[str, str | int]) -> dict[str, Any]:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            raise HttpApiError(_problem(self.url, exc)) from None
        except (OSError, ValueError) as exc:  # URLError is an OSError; ValueError: not JSON
            reason = getattr(exc, "reason", exc)
            raise HttpApiError(f"cannot use the broker's HTTP API at {self.url}: {reason}") from None
        if not isinstance(body, dict):
            raise HttpApiError(f"unexpected answer from {url}")
        found = body.get("cluster_id")
        if self.cluster_id is not None and found != self.cluster_id:
            raise HttpApiError(
                f"the HTTP API at {self.url} serves cluster {found}, not the broker's {self.cluster_id}: "
                "give that broker's HTTP address with --http"
            )
        return body

    def partition_path(self, topic: str, partition: int, what: str) -> str:
        return f"/api/v1/topics/{urllib.parse.quote(topic, safe='')}/partitions/{partition}/tags/{what}"


def _problem(url: str, exc: urllib.error.HTTPError) -> str:
    """The ``detail`` of a problem+json answer (or the HTTP status)."""
    try:
        detail = str(json.loads(exc.read()).get("detail") or exc.reason)
    except (OSError, ValueError, AttributeError):
        detail = str(exc.reason)
    if exc.code == 404 and "no such resource" in detail:
        return f"the HTTP API at {url} has no tag endpoints (is it a logtrove broker of this version?)"
    return f"the broker's HTTP API at {url} answered {exc.code}: {detail}"


def _bytes(text: str | None, b64: str | None) -> bytes | None:
    if text is not None:
        return text.encode("utf-8")
    return base64.b64decode(b64) if b64 is not None else None


def record_of(message: Mapping[str, Any]) -> Record:
    """A record from the API's JSON form of a message (text, or base64 when not UTF-8)."""
    headers = tuple(
        (str(h["name"]), _bytes(h.get("value"), h.get("value_b64"))) for h in message.get("headers", [])
    )
    return Record(
        offset=int(message["offset"]),
        timestamp=int(message["timestamp"]),
        key=_bytes(message.get("key"), message.get("key_b64")),
        value=_bytes(message.get("value"), message.get("value_b64")),
        headers=headers,
    )


class HttpTagCounter:
    """:class:`~logtrove.client.lag.TagCounter` through the broker's HTTP API. After a failure
    it counts nothing more until :meth:`take_failure` reports it (once per lag round,
    so an unreachable API costs one attempt, not one per partition)."""

    def __init__(self, api: HttpApi, *, read_committed: bool = True) -> None:
        self.api = api
        self.read_committed = read_committed
        self.failure: HttpApiError | None = None

    def count(self, topic: str, partition: int, tags: TagFilter, start: int, end: int) -> TagMatches | None:
        if self.failure is not None:
            return None
        params: dict[str, str | int] = {
            "tags": str(tags),
            "offset": start,
            "end_offset": end,
            "isolation": "read_committed" if self.read_committed else "read_uncommitted",
        }
        try:
            body = self.api.get(self.api.partition_path(topic, partition, "count"), params)
        except HttpApiError as exc:
            self.failure = exc
            return None
        first = body.get("first_match_timestamp")
        return TagMatches(int(body["matching"]), int(first) if first is not None else None)

    def take_failure(self) -> HttpApiError | None:
        failure, self.failure = self.failure, None
        return failure
