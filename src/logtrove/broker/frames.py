"""Reading request frames straight into their own buffer (plain TCP listeners).

A ``StreamReader`` behind ``asyncio.start_server`` copies every byte of a request three
times after the kernel: uvloop reads into its buffer and makes a ``bytes`` of each read,
``feed_data`` appends that to the reader's buffer, and ``readexactly`` copies the frame
out of it (then moves whatever followed to the buffer's front). For 1 MB Produce frames
those copies were about a fifth of the event loop's time (py-spy, issue 22).

:class:`FrameProtocol` is an :class:`asyncio.BufferedProtocol` (uvloop then lets the
protocol choose where each ``recv`` lands). Its :class:`FrameReader` is an ordinary
``StreamReader`` for everything it already did (``readexactly`` of the size prefix, EOF,
errors, flow control), fed from one reusable scratch buffer, plus :meth:`FrameReader.readframe`:
it allocates the frame, copies in the part already buffered, and has the socket fill the
rest directly, so a large frame costs one copy (kernel to frame) instead of four. The
frame is a ``bytearray`` the handler owns; nothing writes to it after it is returned.

The protocol does what ``StreamReaderProtocol`` does for a plain connection: a
``StreamWriter`` whose ``drain`` waits while the transport's buffer is above its
high-water mark, the connection callback run as a task, EOF and errors handed to the
reader. TLS listeners keep ``StreamReaderProtocol`` (:mod:`.tls_accept`): the TLS layer
decrypts into its own buffers anyway.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Any, cast

SCRATCH_BYTES = 256 * 1024  # one recv when no frame is being filled (uvloop's own read size)
IN_PLACE_MAX = 2 * 1024 * 1024
"""Largest frame received in place. :meth:`FrameReader.readframe` allocates the whole
frame as soon as its size is known, before its bytes arrive; a larger frame is read with
``readexactly``, whose memory grows only with the bytes actually sent, so a client that
announces a big frame and sends nothing costs no more than a ``StreamReader`` holds for
a connection anyway (twice its 1 MiB limit before it stops reading)."""

Connected = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class FrameReader(asyncio.StreamReader):
    """A ``StreamReader`` that can also receive one frame in place (:meth:`readframe`)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit=limit)
        self._scratch = bytearray(SCRATCH_BYTES)
        self._target: bytearray | None = None  # the frame being received in place
        self._filled = 0

    def get_buffer(self) -> memoryview:
        """Where the next ``recv`` lands: the unfilled rest of the frame being read, or
        the scratch buffer (whose bytes :meth:`buffer_updated` then buffers as
        ``data_received`` would)."""
        if self._target is not None and self._filled < len(self._target):
            return memoryview(self._target)[self._filled :]
        return memoryview(self._scratch)

    def buffer_updated(self, nbytes: int) -> None:
        if self._target is not None and self._filled < len(self._target):
            self._filled += nbytes
            if self._filled == len(self._target):
                self._wakeup_waiter()  # type: ignore[attr-defined]
            return
        with memoryview(self._scratch) as scratch:
            self.feed_data(scratch[:nbytes])  # extends the buffer: a copy

    async def readframe(self, size: int) -> bytearray:
        """Exactly ``size`` bytes, as ``readexactly`` would give them, in a new
        ``bytearray`` the socket fills directly once the buffered bytes are used up.
        Raises ``IncompleteReadError`` at an end of stream first, and the transport's
        error if it failed."""
        if self._exception is not None:  # type: ignore[attr-defined]
            raise self._exception  # type: ignore[attr-defined]
        frame = bytearray(size)
        buffered: bytearray = self._buffer  # type: ignore[attr-defined]
        have = min(len(buffered), size)
        if have:
            with memoryview(buffered) as view:
                frame[:have] = view[:have]
            del buffered[:have]
            self._maybe_resume_transport()  # type: ignore[attr-defined]
        self._target, self._filled = frame, have
        try:
            while self._filled < size:
                if self._exception is not None:  # type: ignore[attr-defined]
                    raise self._exception
                if self._eof:  # type: ignore[attr-defined]
                    raise asyncio.IncompleteReadError(bytes(frame[: self._filled]), size)
                await self._wait_for_data("readframe")  # type: ignore[attr-defined]
        finally:
            self._target = None
        return frame


class FrameProtocol(asyncio.BufferedProtocol):
    """A plain TCP connection read through a :class:`FrameReader` (see the module doc)."""

    def __init__(self, reader: FrameReader, connected: Connected) -> None:
        self._reader = reader
        self._connected = connected
        self._loop = asyncio.get_running_loop()
        self._paused = False
        self._lost = False
        self._drain_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed: asyncio.Future[None] = self._loop.create_future()
        self._task: asyncio.Task[None] | None = None  # a strong reference: the loop keeps weak ones

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        stream = cast(asyncio.Transport, transport)  # uvloop's TCPTransport is not a subclass
        self._reader.set_transport(stream)
        writer = asyncio.StreamWriter(stream, self, self._reader, self._loop)
        self._task = self._loop.create_task(self._run(writer))

    async def _run(self, writer: asyncio.StreamWriter) -> None:
        try:
            await self._connected(self._reader, writer)
        finally:
            self._task = None

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            self._reader.feed_eof()
        else:
            self._reader.set_exception(exc)
        if not self._closed.done():
            if exc is None:
                self._closed.set_result(None)
            else:
                self._closed.set_exception(exc)
                self._closed.exception()  # retrieved: nobody may wait for it
        self._lost = True
        for waiter in self._drain_waiters:
            if not waiter.done():
                if exc is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(exc)

    def eof_received(self) -> bool:
        self._reader.feed_eof()
        return True  # keep the transport: the reply to the last request may still go out

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._reader.buffer_updated(nbytes)

    # -- flow control for StreamWriter.drain (as asyncio's FlowControlMixin) ------------
    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _drain_helper(self) -> None:
        if self._lost:
            raise ConnectionResetError("Connection lost")
        if not self._paused:
            return
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(waiter)
        try:
            await waiter
        finally:
            self._drain_waiters.remove(waiter)

    def _get_close_waiter(self, stream: Any) -> asyncio.Future[None]:
        return self._closed


async def start_frame_server(connected: Connected, host: str, port: int, *, limit: int) -> asyncio.Server:
    """``asyncio.start_server`` with :class:`FrameProtocol` connections."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: FrameProtocol(FrameReader(limit), connected), host, port)
