"""The in-place frame reader (broker/frames.py) over real sockets on uvloop: every frame
arrives whole and in order however the bytes are cut, what was buffered before and what
the socket writes in place join up, an end of stream mid-frame is an IncompleteReadError,
and replies still flow (drain) through the protocol's writer."""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Awaitable, Callable

import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st

from logtrove.broker.frames import IN_PLACE_MAX, SCRATCH_BYTES, FrameReader, start_frame_server

SIZE = struct.Struct(">i")

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.Server, int]:
    server = await start_frame_server(handler, "127.0.0.1", 0, limit=1 << 20)
    return server, int(server.sockets[0].getsockname()[1])


def _echo(ahead_max: int) -> Handler:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _echo_frames(reader, writer, ahead_max)

    return echo


async def _echo_frames(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ahead_max: int) -> None:
    """Reads frames as the broker does (size prefix by readexactly, body by readframe,
    then the next frame may be allocated ahead up to ``ahead_max`` bytes) and answers
    each with its size and its bytes, after a pause that lets the next frame arrive."""
    assert isinstance(reader, FrameReader)
    try:
        while True:
            (size,) = SIZE.unpack(await reader.readexactly(4))
            frame = await reader.readframe(size)
            reader.ahead_max = ahead_max
            await asyncio.sleep(0.001)
            writer.write(SIZE.pack(len(frame)) + bytes(frame))
            await writer.drain()
    except asyncio.IncompleteReadError:
        pass
    finally:
        writer.close()


async def _roundtrip(frames: list[bytes], cuts: list[int], pause_every: int, ahead_max: int) -> list[bytes]:
    server, port = await _serve(_echo(ahead_max))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        stream = b"".join(SIZE.pack(len(f)) + f for f in frames)
        pos = 0
        for i, cut in enumerate(cuts):
            writer.write(stream[pos : pos + cut])
            pos += cut
            if i % pause_every == 0:
                await writer.drain()
                await asyncio.sleep(0)  # lets the server read a partial frame
        writer.write(stream[pos:])
        got = []
        for _ in frames:
            (size,) = SIZE.unpack(await reader.readexactly(4))
            got.append(await reader.readexactly(size))
        writer.close()
        return got
    finally:
        server.close()


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 3 * SCRATCH_BYTES), min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 200_000), max_size=20),
    pause_every=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    ahead_max=st.sampled_from([0, SCRATCH_BYTES, IN_PLACE_MAX]),
)
def test_frames_arrive_whole_and_in_order_however_the_bytes_are_cut(
    sizes: list[int], cuts: list[int], pause_every: int, seed: int, ahead_max: int
) -> None:
    """Received in place from readframe on, or ahead (the next frame allocated while the
    handler works on one), or through the buffer: the same frames."""
    rng = random.Random(seed)
    frames = [rng.randbytes(n) for n in sizes]
    assert uvloop.run(_roundtrip(frames, cuts, pause_every, ahead_max)) == frames


def test_many_frames_sent_back_to_back_in_one_write() -> None:
    """Frames that arrive together with the one being read (the buffered part of the next
    frame, read ahead by the socket) are not lost or reordered."""
    rng = random.Random(7)
    frames = [rng.randbytes(rng.choice([5, 900, 70_000, 1_000_100])) for _ in range(30)]
    assert uvloop.run(_roundtrip(frames, [], 1, IN_PLACE_MAX)) == frames
    assert uvloop.run(_roundtrip(frames, [], 1, 0)) == frames


def test_an_end_of_stream_mid_frame_is_an_incomplete_read() -> None:
    outcome: list[object] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert isinstance(reader, FrameReader)
        (size,) = SIZE.unpack(await reader.readexactly(4))
        try:
            await reader.readframe(size)
        except asyncio.IncompleteReadError as exc:
            outcome.append((len(exc.partial), exc.expected))
        writer.close()

    async def main() -> None:
        server, port = await _serve(handler)
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(SIZE.pack(500_000) + b"x" * 300_000)
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.close()
            for _ in range(200):
                if outcome:
                    break
                await asyncio.sleep(0.01)
        finally:
            server.close()

    uvloop.run(main())
    assert outcome == [(300_000, 500_000)]


def test_a_large_reply_waits_for_the_client_to_read_and_then_arrives_whole() -> None:
    """``drain`` through the protocol's flow control: a reply far above the transport's
    high-water mark is sent while the client is not reading, then read whole."""
    reply = random.Random(3).randbytes(8 * 1024 * 1024)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(1)
        writer.write(reply)
        await writer.drain()
        writer.close()

    async def main() -> bytes:
        server, port = await _serve(handler)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"!")
            await asyncio.sleep(0.1)  # the server's drain has to wait meanwhile
            data = await reader.readexactly(len(reply))
            writer.close()
            return data
        finally:
            server.close()

    assert uvloop.run(main()) == reply
