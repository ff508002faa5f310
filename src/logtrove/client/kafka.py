"""A minimal synchronous Kafka-protocol client: the CLI's ``--bootstrap`` mode, the
mirror, lag and tag consumers through a running broker.

One blocking TCP connection to one broker, one request at a time (requests are encoded
and responses decoded by kio, from the same version-independent dicts the broker's
handlers use, see :mod:`logtrove.wire`). It is enough to administer
topics and write records through a running logtrove broker (or any Kafka broker serving
the versions used here), not a general Kafka client: no cluster routing, no retries.
TLS and SASL when given a :class:`~logtrove.client.security.ClientSecurity`.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from logtrove.client.errors import KafkaProtocolError
from logtrove.client.security import ClientSecurity
from logtrove.clock import ascii_int
from logtrove.wire import SIZE, ApiKey, ResponseError, decode_response, encode_request

DEFAULT_MAX_RESPONSE = 256 * 1024 * 1024  # a response frame larger than this is not read


def parse_bootstrap(text: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port); raises ValueError with an example."""
    host, sep, port = text.rpartition(":")
    number = ascii_int(port)
    if not sep or not host or number is None:
        raise ValueError(f"bootstrap address must be HOST:PORT (e.g. 127.0.0.1:9092), got {text!r}")
    return host, number


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
        self, api_key: ApiKey, version: int, body: Mapping[str, Any], *, expect_response: bool = True
    ) -> Any:
        """Send one request and return the decoded response body (a kio entity)."""
        self._correlation += 1
        payload = encode_request(api_key, version, self._correlation, self.client_id, body)
        self._sock.sendall(SIZE.pack(len(payload)) + payload)
        if not expect_response:
            return None
        (size,) = SIZE.unpack(self._recv(SIZE.size))
        if not 0 <= size <= self.max_frame_bytes:
            raise KafkaProtocolError(
                f"{self.bootstrap} sent a response frame of {size} bytes (limit {self.max_frame_bytes})"
            )
        try:
            return decode_response(api_key, version, self._correlation, self._recv(size))
        except ResponseError as exc:
            raise KafkaProtocolError(str(exc)) from exc

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
