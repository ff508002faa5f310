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
import struct
from collections.abc import Awaitable, Callable
from typing import Any, cast

SCRATCH_BYTES = 256 * 1024  # one recv when no frame is being filled (uvloop's own read size)
IN_PLACE_MAX = 2 * 1024 * 1024
"""Largest frame received in place. :meth:`FrameReader.readframe` allocates the whole
frame as soon as its size is known, before its bytes arrive; a larger frame is read with
``readexactly``, whose memory grows only with the bytes actually sent, so a client that
announces a big frame and sends nothing costs no more than a ``StreamReader`` holds for
a connection anyway (twice its 1 MiB limit before it stops reading)."""

_SIZE = struct.Struct(">i")  # a frame's size prefix
AHEAD_SCAN = 64  # complete frames in the buffer looked past to find the next one to allocate
Connected = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class FrameReader(asyncio.StreamReader):
    """A ``StreamReader`` that can also receive frames in place (:meth:`readframe`).

    The frame being received in place is ``_target`` (its first ``_filled`` bytes
    arrived); whatever is in the ``StreamReader`` buffer then precedes its body (complete
    frames and its size prefix, not read yet) or, once it is complete, follows it. A frame is received
    in place from :meth:`readframe` on, or earlier, **ahead**: while the handler works
    on one frame, the next ones may already be buffered, and when the first incomplete
    one's size prefix is, :meth:`get_buffer` allocates it (up to ``ahead_max`` bytes, which the broker sets
    for authenticated connections only) and moves the buffered part of its body there,
    so the rest of it never passes through the buffer either. That needs the buffer to
    begin at a frame's size prefix that nobody has begun to read (``_at_boundary``:
    true at the start and after each :meth:`readframe`, false once ``readexactly``
    takes bytes)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit=limit)
        self._scratch = bytearray(SCRATCH_BYTES)
        self._target: bytearray | None = None  # the frame being received in place
        self._filled = 0
        self._before_target = 0  # bytes of the buffer that come before the target's body
        self._at_boundary = True
        self.ahead_max = 0  # largest frame allocated ahead (0: none)

    async def readexactly(self, n: int) -> bytes:
        self._at_boundary = False
        data = await super().readexactly(n)
        if self._target is not None:
            self._before_target -= n
        return data

    def get_buffer(self) -> memoryview:
        """Where the next ``recv`` lands: the unfilled rest of the frame received in
        place (allocated ahead if its size prefix is buffered, see the class doc), or
        the scratch buffer (whose bytes :meth:`buffer_updated` then buffers as
        ``data_received`` would)."""
        if self._target is None and self._at_boundary and self.ahead_max:
            self._start_ahead()
        if self._target is not None and self._filled < len(self._target):
            return memoryview(self._target)[self._filled :]
        return memoryview(self._scratch)

    def _start_ahead(self) -> None:
        """Allocate the first incomplete frame of the buffer (after up to
        :data:`AHEAD_SCAN` complete ones) and move its buffered body there."""
        buffered: bytearray = self._buffer  # type: ignore[attr-defined]
        pos = 0
        for _ in range(AHEAD_SCAN):
            if len(buffered) - pos < _SIZE.size:
                return
            (size,) = _SIZE.unpack_from(buffered, pos)
            body = len(buffered) - pos - _SIZE.size
            if body >= size:  # complete: readframe copies it from the buffer
                pos += _SIZE.size + max(size, 0)
                continue
            if not 0 < size <= self.ahead_max:
                return  # not to be allocated before its bytes arrive
            frame = bytearray(size)
            with memoryview(buffered) as view:
                frame[:body] = view[pos + _SIZE.size :]
            del buffered[pos + _SIZE.size :]  # its size prefix stays, for the handler to read
            self._target, self._filled, self._before_target = frame, body, len(buffered)
            return

    def buffer_updated(self, nbytes: int) -> None:
        if self._target is not None and self._filled < len(self._target):
            self._filled += nbytes
            if self._filled == len(self._target):
                self._wakeup_waiter()  # type: ignore[attr-defined]
            return
        with memoryview(self._scratch) as scratch:
            self.feed_data(scratch[:nbytes])  # extends the buffer: a copy

    async def readframe(self, size: int) -> bytearray:
        """Exactly ``size`` bytes after the size prefix just read, as ``readexactly``
        would give them, in a ``bytearray`` the socket fills directly once the buffered
        bytes are used up (or has been filling ahead). Raises ``IncompleteReadError`` at
        an end of stream first, and the transport's error if it failed."""
        if self._exception is not None:  # type: ignore[attr-defined]
            raise self._exception  # type: ignore[attr-defined]
        if self._target is not None and self._before_target == 0:
            # allocated ahead, from the prefix just read (the frames before it were in
            # the buffer and have been read)
            if len(self._target) != size:
                raise RuntimeError(f"frame of {size} bytes expected, {len(self._target)} allocated ahead")
            frame = self._target
        elif self._target is not None:  # allocated ahead for a later frame: this one is buffered
            if self._before_target < size:
                raise RuntimeError(f"frame of {size} bytes expected whole before one allocated ahead")
            buffered = self._buffer  # type: ignore[attr-defined]
            with memoryview(buffered) as view:
                frame = bytearray(view[:size])
            del buffered[:size]
            self._maybe_resume_transport()  # type: ignore[attr-defined]
            self._before_target -= size
            self._at_boundary = True
            return frame
        else:
            buffered = self._buffer  # type: ignore[attr-defined]
            have = min(len(buffered), size)
            with memoryview(buffered) as view:
                if have == size:  # whole in the buffer: one copy, no zeroing first
                    frame = bytearray(view[:size])
                else:
                    frame = bytearray(size)
                    frame[:have] = view[:have]
            del buffered[:have]
            self._maybe_resume_transport()  # type: ignore[attr-defined]
            if have == size:
                self._at_boundary = True
                return frame
            self._target, self._filled, self._before_target = frame, have, 0
        try:
            while self._filled < size:
                if self._exception is not None:  # type: ignore[attr-defined]
                    raise self._exception
                if self._eof:  # type: ignore[attr-defined]
                    raise asyncio.IncompleteReadError(bytes(frame[: self._filled]), size)
                await self._wait_for_data("readframe")  # type: ignore[attr-defined]
        finally:
            self._target = None
        self._at_boundary = True
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
