"""A minimal raw Kafka-protocol client (kio-encoded) for tests that need exact control."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader

from logtrove.wire import ApiKey, encode_request, list_offsets_body, response_header_size


class WireClient:
    def __init__(self, port: int, timeout: float = 10) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.correlation = 0

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv(4))[0]
        return self._recv(size)

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return buf

    def encode_request(self, api_key: int, version: int, body: dict[str, Any]) -> bytes:
        self.correlation += 1
        return encode_request(api_key, version, self.correlation, "wire-test", body)

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.send_frame(self.encode_request(api_key, version, body))
        frame = self.recv_frame()
        resp_cls = load_response_schema(api_key, version)
        assert struct.unpack_from(">i", frame)[0] == self.correlation
        header_size = response_header_size(resp_cls.__flexible__, api_key)
        value, _ = entity_reader(resp_cls)(frame, header_size)
        return value

    def list_offsets(self, topic: str, partition: int, timestamp: int) -> Any:
        resp = self.request(ApiKey.LIST_OFFSETS, 7, list_offsets_body(topic, [partition], timestamp))
        return resp.topics[0].partitions[0]
