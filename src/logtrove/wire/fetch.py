"""The Fetch response, encoded by hand around record bytes that are never copied.

kio would copy every ``records`` field into the encoded response; this encoder emits the
bytes *around* each records field as small chunks and the records themselves as
separate chunks (one ``pread`` each, by the broker), so a megabyte of records is never
copied into a larger buffer or re-encoded. Layout, for the versions served (4-16;
flexible = 12+, topic IDs = 13+)::

    throttle_ms i32 | error_code i16 (7+) | session_id i32 (7+)
    [topics]  topic: name string (<13) or topic_id uuid (13+)
      [partitions]  index i32 | error_code i16 | high_watermark i64
                    | last_stable_offset i64 | log_start_offset i64 (5+)
                    | aborted_transactions [producer_id i64 | first_offset i64 | tags (12+)]
                    | preferred_read_replica i32 (11+)
                    | records (nullable bytes) | tags (12+)
      tags (12+)
    tags (12+)

Flexible versions use unsigned-varint lengths (N + 1) and end each struct with an empty
tag section (one 0 byte).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from logtrove.wire.framing import uvarint


class AbortedRange(Protocol):
    """An aborted transaction of a fetched range, as read_committed clients are told it."""

    @property
    def producer_id(self) -> int: ...

    @property
    def first_offset(self) -> int: ...


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TOP = struct.Struct(">ihi")  # throttle, error_code, session_id
_PART = struct.Struct(">ihqqq")  # index, error_code, high watermark, last stable, log start
_PART_V4 = struct.Struct(">ihqq")  # no log start offset before v5
_ABORTED = struct.Struct(">qq")  # producer ID, first offset


@dataclass
class FetchedPartition:
    """What one partition contributes to a Fetch response."""

    index: int
    error: int
    high_watermark: int
    log_start: int
    records: bytes | memoryview | None
    last_stable: int = -1  # -1: the high watermark (no transaction known open)
    aborted: Sequence[AbortedRange] | None = None  # read_committed: aborted transactions of the range


class _Encoder:
    """Accumulates small fields in a buffer, and big record payloads as their own chunks."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.chunks: list[bytes | memoryview] = []
        self.buf = bytearray()

    def array_len(self, n: int) -> None:
        self.buf += uvarint(n + 1) if self.flexible else _I32.pack(n)

    def string(self, text: str) -> None:
        raw = text.encode("utf-8")
        self.buf += uvarint(len(raw) + 1) if self.flexible else _I16.pack(len(raw))
        self.buf += raw

    def records(self, data: bytes | memoryview | None) -> None:
        """Records as bytes; none is sent as empty bytes (librdkafka rejects null)."""
        data = b"" if data is None else data
        self.buf += uvarint(len(data) + 1) if self.flexible else _I32.pack(len(data))
        if len(data) < 4096:
            self.buf += data
        else:
            self.chunks.append(bytes(self.buf))
            self.buf = bytearray()
            self.chunks.append(data)

    def tags(self) -> None:
        if self.flexible:
            self.buf.append(0)

    def finish(self) -> list[bytes | memoryview]:
        if self.buf:
            self.chunks.append(bytes(self.buf))
        return self.chunks


def encode_fetch_response(
    version: int, flexible: bool, topics: list[tuple[str, uuid.UUID, list[FetchedPartition]]]
) -> list[bytes | memoryview]:
    enc = _Encoder(flexible)
    enc.buf += _TOP.pack(0, 0, 0) if version >= 7 else _I32.pack(0)
    enc.array_len(len(topics))
    for name, topic_id, partitions in topics:
        if version >= 13:
            enc.buf += topic_id.bytes
        else:
            enc.string(name)
        enc.array_len(len(partitions))
        for p in partitions:
            stable = p.high_watermark if p.last_stable < 0 else p.last_stable
            if version >= 5:
                enc.buf += _PART.pack(p.index, p.error, p.high_watermark, stable, p.log_start)
            else:
                enc.buf += _PART_V4.pack(p.index, p.error, p.high_watermark, stable)
            aborted = p.aborted or ()
            enc.array_len(len(aborted))
            for a in aborted:
                enc.buf += _ABORTED.pack(a.producer_id, a.first_offset)
                enc.tags()
            if version >= 11:
                enc.buf += _I32.pack(-1)  # preferred read replica
            enc.records(p.records)
            enc.tags()
        enc.tags()
    enc.tags()
    return enc.finish()
