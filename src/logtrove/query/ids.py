"""Message IDs: time-ordered client IDs, and broker position IDs.

**Client IDs** (:class:`MessageIdGenerator`) are 64-bit
snowflakes written as 13 Crockford base-32 characters, so they sort by time as strings::

    ┌─────────────────────────────┬──────────────┬──────────────────┐
    │ ms since 2024-01-01   42 b  │ node    10 b │ sequence    12 b │
    └─────────────────────────────┴──────────────┴──────────────────┘

A producer puts one in the topic's ID header (``message.id.header``, default ``id``).
:func:`id_time` reads the time back; a by-ID query uses it only as a hint to look at the
segments around that time first, and still searches everything when the message is not
there (client and broker clocks disagree, or the ID was not made here).

**Position IDs** (:func:`position_id`, RocketMQ's offsetMsgId idea) encode topic,
partition and offset and are decoded straight to a read, no index needed. Every query
result carries one: ``L`` + base64url(check u16, version u8, partition u32, offset u64,
topic UTF-8), where ``check`` is 16 bits of xxh3 over the rest, so that a random string
is not mistaken for one.
"""

from __future__ import annotations

import base64
import binascii
import os
import struct
import threading

import xxhash

from logtrove.clock import SYSTEM_CLOCK, Clock

EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {c: i for i, c in enumerate(_CROCKFORD)} | {c.lower(): i for i, c in enumerate(_CROCKFORD)}
_ID_CHARS = 13
_NODE_BITS, _SEQ_BITS = 10, 12
_POSITION = struct.Struct(">BIQ")
_CHECK = struct.Struct(">H")
_POSITION_VERSION = 1


class MessageIdGenerator:
    """Unique, time-ordered IDs for one producer process (thread-safe).

    ``node`` (0-1023) tells concurrent producers apart; by default it is random. Within a
    millisecond up to 4096 IDs are made; past that, or when the clock steps back, the
    time part runs ahead of the clock so IDs keep increasing.
    """

    def __init__(self, node: int | None = None, *, clock: Clock = SYSTEM_CLOCK) -> None:
        if node is None:
            node = int.from_bytes(os.urandom(2), "big") % (1 << _NODE_BITS)
        if not 0 <= node < 1 << _NODE_BITS:
            raise ValueError(f"node must be 0-{(1 << _NODE_BITS) - 1}")
        self.node = node
        self.clock = clock
        self._lock = threading.Lock()
        self._last_ms = -1
        self._seq = 0

    def next_id(self) -> str:
        with self._lock:
            now = self.clock.now_ms() - EPOCH_MS
            if now > self._last_ms:
                self._last_ms, self._seq = now, 0
            else:
                self._seq += 1
                if self._seq >> _SEQ_BITS:
                    self._last_ms, self._seq = self._last_ms + 1, 0
            value = (self._last_ms << (_NODE_BITS + _SEQ_BITS)) | (self.node << _SEQ_BITS) | self._seq
        return _encode_base32(value)


def _encode_base32(value: int) -> str:
    chars = []
    for _ in range(_ID_CHARS):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def id_time(message_id: str) -> int | None:
    """Epoch milliseconds embedded in an ID made by :class:`MessageIdGenerator`, or
    ``None`` if ``message_id`` does not have that shape."""
    if len(message_id) != _ID_CHARS:
        return None
    value = 0
    for c in message_id:
        digit = _DECODE.get(c)
        if digit is None:
            return None
        value = (value << 5) | digit
    if value >> 64:
        return None
    return (value >> (_NODE_BITS + _SEQ_BITS)) + EPOCH_MS


def position_id(topic: str, partition: int, offset: int) -> str:
    """The broker position ID of a record."""
    body = _POSITION.pack(_POSITION_VERSION, partition, offset) + topic.encode("utf-8")
    check = _CHECK.pack(xxhash.xxh3_64_intdigest(body) & 0xFFFF)
    return "L" + base64.urlsafe_b64encode(check + body).decode("ascii").rstrip("=")


def decode_position_id(text: str) -> tuple[str, int, int] | None:
    """(topic, partition, offset) of a position ID; ``None`` if ``text`` is not one."""
    if not text.startswith("L") or len(text) < 20:
        return None
    raw = text[1:]
    try:
        data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except (binascii.Error, ValueError):
        return None
    if len(data) < _CHECK.size + _POSITION.size:
        return None
    (check,) = _CHECK.unpack_from(data)
    body = data[_CHECK.size :]
    if xxhash.xxh3_64_intdigest(body) & 0xFFFF != check:
        return None
    version, partition, offset = _POSITION.unpack_from(body)
    if version != _POSITION_VERSION:
        return None
    try:
        topic = body[_POSITION.size :].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return topic, partition, offset
