"""Tag-filtered consumption and tag-aware lag through a running broker (``--bootstrap``,
``--http``), from any machine.

The Kafka protocol has no tag filter, so matching records and tag counts come from the
broker's HTTP API, which filters next to the data with ``.tagidx``
(:mod:`logtrove.http.api.tags`); every record (``*``) comes over Kafka Fetch, and start
positions (ListOffsets) and commits
(OffsetCommit) go over the Kafka protocol (:mod:`.remote_groups`). Every HTTP answer
carries the broker's cluster ID, checked against the Kafka side's, so records never come
from one broker while commits go to another.

From Python::

    from logtrove.broker.client import KafkaClient
    from logtrove.cli import remote_groups
    from logtrove.cli.remote_groups import BrokerCommitter
    from logtrove.cli.remote_tags import HttpApi, RemoteTagSource
    from logtrove.groups.consumer import TagConsumer

    with KafkaClient("127.0.0.1:9092") as client:
        api = HttpApi("http://127.0.0.1:8080", cluster_id=remote_groups.cluster_id(client))
        consumer = TagConsumer(RemoteTagSource(client, api), "orders", "TagA || TagB",
                               group="billing", committer=BrokerCommitter(client))
        for c in consumer: ...
        consumer.commit()
"""

from __future__ import annotations

import base64
import contextlib
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

import typer
from kio.schema.errors import ErrorCode

from logtrove.broker.client import KafkaClient, KafkaProtocolError
from logtrove.cli import remote_groups
from logtrove.cli.common import fail
from logtrove.cli.remote_groups import TagMatches
from logtrove.groups.consumer import StartAt
from logtrove.groups.tags import TagFetch, TagFilter
from logtrove.records import Record

DEFAULT_HTTP_PORT = 8080
MAX_RECORDS_PER_FETCH = 10_000  # the endpoint's limit

HttpOption = Annotated[
    str | None,
    typer.Option(
        "--http",
        envvar="LOGTROVE_HTTP",
        help="With --bootstrap: the broker's HTTP API (URL or HOST:PORT), for what only its "
        "files know (tag filters and counts, indexed offsets). Default: the --bootstrap host, "
        "port 8080.",
        show_default=False,
    ),
]


class HttpApiError(Exception):
    """The broker's HTTP API could not be reached, answered with a problem, or belongs to
    another broker."""


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


class RemoteTagSource:
    """:class:`~logtrove.groups.consumer.TagSource` of a running broker: records from its
    HTTP API (filtered there) or, for ``*``, from Kafka Fetch; start offsets from Kafka
    ListOffsets through ``client``.
    A fetch returns at most ``max_bytes`` of keys, values and headers (and at least one
    record). With ``read_committed`` (the default) both ask for committed data only (the
    HTTP ``isolation`` parameter, Kafka's READ_COMMITTED Fetch)."""

    def __init__(
        self, client: KafkaClient, api: HttpApi, *, max_bytes: int = 1 << 20, read_committed: bool = True
    ) -> None:
        self.client = client
        self.api = api
        self.max_bytes = max_bytes
        self.read_committed = read_committed

    def partition_count(self, topic: str) -> int:
        n = remote_groups.topic_partitions(self.client, topic)
        if n is None:
            raise KafkaProtocolError(f"unknown topic {topic!r}")
        return n

    def start_offset(self, topic: str, partition: int, start: StartAt) -> int:
        def offsets(timestamp: int) -> int:
            found = remote_groups.list_offsets(
                self.client, topic, [partition], timestamp, read_committed=self.read_committed
            )
            return found[partition]

        def by_time(timestamp: int) -> int | None:
            found = offsets(timestamp)
            return found if found >= 0 else None

        return start.pick(offsets(remote_groups.EARLIEST), offsets(remote_groups.LATEST), by_time)

    def fetch(self, topic: str, partition: int, tags: TagFilter, offset: int, max_records: int) -> TagFetch:
        if tags.match_all:
            return self._fetch_all(topic, partition, offset, max_records)
        params: dict[str, str | int] = {
            "tags": str(tags),
            "offset": offset,
            "max_records": min(max_records, MAX_RECORDS_PER_FETCH),
            "max_bytes": self.max_bytes,
            "isolation": "read_committed" if self.read_committed else "read_uncommitted",
        }
        body = self.api.get(self.api.partition_path(topic, partition, "fetch"), params)
        records = [record_of(m) for m in body["messages"]]
        return TagFetch(records, int(body["next_offset"]), int(body["log_end_offset"]))

    def _fetch_all(self, topic: str, partition: int, offset: int, max_records: int) -> TagFetch:
        """Every record (``*``) needs no tag index: a Kafka Fetch, so it works without the
        HTTP API and against any Kafka broker. A position below the log start (retention
        deleted it) moves to the log start, as the HTTP endpoint does."""
        try:
            got = remote_groups.fetch(
                self.client, topic, partition, offset, self.max_bytes, read_committed=self.read_committed
            )
        except KafkaProtocolError as exc:
            start = remote_groups.list_offsets(self.client, topic, [partition], remote_groups.EARLIEST)
            if exc.code != ErrorCode.offset_out_of_range or offset >= start[partition]:
                raise
            offset = start[partition]
            got = remote_groups.fetch(
                self.client, topic, partition, offset, self.max_bytes, read_committed=self.read_committed
            )
        records = got.records[:max_records]
        next_offset = records[-1].offset + 1 if len(got.records) > max_records else got.next_offset
        return TagFetch(records, next_offset, got.log_end_offset)

    def refresh(self) -> None:
        """Nothing to do: every fetch asks the broker."""


class HttpTagCounter:
    """:class:`~.remote_groups.TagCounter` through the broker's HTTP API. After a failure
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


@contextlib.contextmanager
def http_errors() -> Iterator[None]:
    """Turn :class:`HttpApiError` into a CLI error (exit code 1)."""
    try:
        yield
    except HttpApiError as exc:
        fail(str(exc))
