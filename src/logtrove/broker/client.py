"""A minimal synchronous Kafka-protocol client, for the CLI's ``--bootstrap`` mode.

One blocking TCP connection to one broker, one request at a time (requests are encoded
and responses decoded by kio, from the same version-independent dicts the broker's
handlers use, see :func:`logtrove.broker.protocol.build`). It is enough to administer
topics and write records through a running logtrove broker (or any Kafka broker serving
the versions used here), not a general Kafka client: no cluster routing, no retries.
TLS and SASL when given a :class:`~logtrove.broker.client_security.ClientSecurity`.
"""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from logtrove.broker.client_security import ClientSecurity
from logtrove.broker.protocol import build

_SIZE = struct.Struct(">i")
DEFAULT_MAX_RESPONSE = 256 * 1024 * 1024  # a response frame larger than this is not read


class KafkaProtocolError(Exception):
    """The broker answered with a Kafka error code (or an unreadable response)."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code


def parse_bootstrap(text: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port); raises ValueError with an example."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bootstrap address must be HOST:PORT (e.g. 127.0.0.1:9092), got {text!r}")
    return host, int(port)


class KafkaClient:
    """A blocking connection to one broker."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout_s: float = 30,
        client_id: str = "logtrove-cli",
        max_frame_bytes: int = DEFAULT_MAX_RESPONSE,
        security: ClientSecurity | None = None,
    ) -> None:
        host, port = parse_bootstrap(bootstrap)
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes  # a larger response frame is refused unread
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._correlation = 0
        if security is not None:
            try:
                self._sock = security.wrap(self._sock, host)
                security.authenticate(self)
            except BaseException:
                self._sock.close()
                raise

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def request(
        self, api_key: int, version: int, body: dict[str, Any], *, expect_response: bool = True
    ) -> Any:
        """Send one request and return the decoded response body (a kio entity)."""
        req_cls = load_request_schema(api_key, version)
        header_cls = req_cls.__header_schema__
        self._correlation += 1
        header = build(
            header_cls,
            {
                "request_api_key": api_key,
                "request_api_version": version,
                "correlation_id": self._correlation,
                "client_id": self.client_id,
            },
        )
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header)
        entity_writer(req_cls)(buf, build(req_cls, body))
        payload = buf.getvalue()
        self._sock.sendall(_SIZE.pack(len(payload)) + payload)
        if not expect_response:
            return None
        (size,) = _SIZE.unpack(self._recv(_SIZE.size))
        if not 0 <= size <= self.max_frame_bytes:
            raise KafkaProtocolError(
                f"{self.bootstrap} sent a response frame of {size} bytes (limit {self.max_frame_bytes})"
            )
        frame = self._recv(size)
        resp_cls = load_response_schema(api_key, version)
        try:
            resp_header, used = entity_reader(resp_cls.__header_schema__)(frame, 0)
            if resp_header.correlation_id != self._correlation:
                raise KafkaProtocolError("response out of order (correlation id mismatch)")
            value, _ = entity_reader(resp_cls)(frame, used)
        except (ValueError, KeyError) as exc:
            raise KafkaProtocolError(f"unreadable response to api key {api_key}: {exc}") from exc
        return value

    def _recv(self, n: int) -> bytes:
        chunks = []
        remaining = n
        while remaining:
            chunk = self._sock.recv(min(remaining, 1 << 20))
            if not chunk:
                raise ConnectionError(f"{self.bootstrap} closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)


def check(code: Any, message: str | None, what: str) -> None:
    """Raise :class:`KafkaProtocolError` for a non-zero error code."""
    value = int(code)
    if value:
        name = getattr(code, "name", str(value)).upper()
        raise KafkaProtocolError(f"{what}: {name}" + (f" ({message})" if message else ""), value)


def fetch_body(
    wants: Mapping[str, Sequence[tuple[int, int, int]]],
    *,
    max_wait_ms: int,
    max_bytes: int,
    isolation_level: int = 0,
) -> dict[str, Any]:
    """The body of a consumer's Fetch (v4-v12: replica id -1, READ_UNCOMMITTED unless
    ``isolation_level`` is 1, no fetch session) for ``wants``: topic -> (partition, fetch
    offset, partition max bytes)."""
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_max,
                    }
                    for partition, offset, partition_max in parts
                ],
            }
            for topic, parts in wants.items()
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
