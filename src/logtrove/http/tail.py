"""Live tail: the new records of a topic as server-sent events, filtered on the server.

A tail starts at the log end (or at a cursor: ``Last-Event-ID``, which browsers send
again when they reconnect, or ``?cursor=``) and polls every partition's log end offset.
Every record that passes the filter is one event::

    retry: 2000
    event: ready                      once, when the tail is positioned
    data: {"cursor": "0:120,1:98", "partitions": 2}

    id: 0:121,1:98                    the cursor after this record: resume from here
    event: message
    data: {"topic": "orders", "partition": 0, "offset": 120, …}

    event: skipped                    the tail fell more than max_behind records behind
    data: {"partition": 0, "from": 121, "to": 90121}

    : heartbeat                       a comment every heartbeat_s when nothing else is sent

Bounds: one tail holds at most one poll's records (``max_records_per_poll`` per partition,
at most ``max_poll_bytes`` of them) and writes them one event at a time, waiting for the
socket (uvicorn's flow control) so a slow reader is never buffered for; a tail further
behind than ``max_behind`` skips ahead and says so, since it shows what happens now, it is
not a replay. An app serves at most ``max_tails`` tails at once (503 past that).
:meth:`TailHub.close` (called by the server as it shuts down) ends every tail within one
poll interval, so shutdown never waits on an open stream.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio

from logtrove.clock import ascii_int
from logtrove.http.context import HttpContext
from logtrove.http.problems import Problem, bad_request
from logtrove.http.render import render_message
from logtrove.query import Message as QueryMessage
from logtrove.records import Record
from logtrove.storage import StorageError

MAX_CURSOR_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class TailFilter:
    """What a record must have to be shown; ``None`` fields match everything."""

    key: bytes | None = None
    tag: bytes | None = None
    contains: bytes | None = None
    tag_header: str = "tag"

    def matches(self, record: Record) -> bool:
        if self.key is not None and record.key != self.key:
            return False
        if self.tag is not None and record.header(self.tag_header) != self.tag:
            return False
        return self.contains is None or self.contains in (record.value or b"")


@dataclass(frozen=True, slots=True)
class TailLimits:
    poll_interval_s: float = 0.25
    heartbeat_s: float = 15.0
    max_records_per_poll: int = 500
    max_poll_bytes: int = 1 << 20
    max_behind: int = 10_000
    max_tails: int = 64


class TailHub:
    """The open tails of one app: counts them against ``max_tails`` and ends them all at
    :meth:`close`."""

    def __init__(self, limits: TailLimits | None = None) -> None:
        self.limits = limits or TailLimits()
        self.closed = False
        self._open = 0
        self._lock = threading.Lock()

    @property
    def open_tails(self) -> int:
        return self._open

    def close(self) -> None:
        """End every tail (within one poll interval) and refuse new ones."""
        self.closed = True

    def admit(self) -> None:
        """Count a new tail in; a 503 problem when the server is closing or full."""
        with self._lock:
            if self.closed:
                raise Problem(503, "shutting-down", "Shutting down", "the server is shutting down")
            if self._open >= self.limits.max_tails:
                raise Problem(
                    503,
                    "too-many-tails",
                    "Too many live tails",
                    f"this server follows at most {self.limits.max_tails} live tails at once",
                )
            self._open += 1

    def release(self) -> None:
        with self._lock:
            self._open -= 1


def parse_cursor(text: str, partitions: int) -> dict[int, int]:
    """``"0:120,1:98"`` → ``{0: 120, 1: 98}``; a 422 problem for anything else."""
    if len(text) > MAX_CURSOR_CHARS:
        raise bad_request("the tail cursor is too long")
    out: dict[int, int] = {}
    for item in filter(None, text.split(",")):
        p, sep, o = item.partition(":")
        partition, offset = ascii_int(p), ascii_int(o)
        if not sep or partition is None or offset is None or partition >= partitions:
            raise bad_request(f"cannot read the tail cursor {text[:80]!r}: expected PARTITION:OFFSET,…")
        out[partition] = offset
    return out


def format_cursor(positions: dict[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(positions.items()))


def _event(kind: str, data: object, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


class Tail:
    """One connection's tail of ``topic`` (the partitions in ``positions``)."""

    def __init__(
        self,
        ctx: HttpContext,
        hub: TailHub,
        topic: str,
        positions: dict[int, int | None],
        match: TailFilter,
    ) -> None:
        self.ctx = ctx
        self.hub = hub
        self.topic = topic
        self.match = match
        self.positions = self._start(positions)

    def _start(self, wanted: dict[int, int | None]) -> dict[int, int]:
        """Each partition's first offset to show: the given one clamped to the log, or the
        log end."""
        storage = self.ctx.fresh_storage()
        out = {}
        for p, offset in wanted.items():
            log = storage.log(self.topic, p)
            start, end = log.log_start_offset, log.log_end_offset
            out[p] = end if offset is None else min(max(offset, start), end)
        return out

    async def events(self) -> AsyncIterator[str]:
        """The event stream; ends when the hub closes (the caller releases the hub)."""
        limits = self.hub.limits
        yield f"retry: 2000\n\n{_event('ready', {'cursor': format_cursor(self.positions), 'partitions': len(self.positions)})}"
        quiet_since = time.monotonic()
        while not self.hub.closed:
            try:
                found = await anyio.to_thread.run_sync(self._poll)
            except StorageError as exc:  # the topic was deleted, the data directory went away
                yield _event("error", {"detail": str(exc)})
                return
            for chunk in found:
                yield chunk
            if found:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= limits.heartbeat_s:
                yield ": heartbeat\n\n"
                quiet_since = time.monotonic()
            await asyncio.sleep(limits.poll_interval_s)

    def _poll(self) -> list[str]:
        """New events since the last poll, read in a worker thread (never on the event loop)."""
        limits = self.hub.limits
        storage = self.ctx.fresh_storage()
        id_header = storage.topic(self.topic).config.message_id_header
        out: list[str] = []
        budget = limits.max_poll_bytes
        for p, position in sorted(self.positions.items()):
            log = storage.log(self.topic, p)
            end = log.log_end_offset
            begin = max(position, log.log_start_offset)
            if end - begin > limits.max_behind:
                out.append(_event("skipped", {"partition": p, "from": begin, "to": end}))
                begin = end
            self.positions[p] = begin
            for taken, record in enumerate(log.records(begin, end), 1):
                self.positions[p] = record.offset + 1
                if self.match.matches(record):
                    message = render_message(QueryMessage.of(self.topic, p, record), id_header=id_header)
                    text = message.model_dump_json()
                    budget -= len(text)
                    out.append(f"id: {format_cursor(self.positions)}\nevent: message\ndata: {text}\n\n")
                if taken >= limits.max_records_per_poll or budget <= 0:
                    break
            if budget <= 0:
                break
        return out
