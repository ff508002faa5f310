"""``.skip``: per-block summaries that let time and content searches skip log ranges.

One file per segment, made of blocks (:mod:`.blockfile`, kind ``S``); each block
summarises the records of its log range ``[start offset, end offset)``::

    ┌──────────────────────┬─────────────────────┬─────────────────────┐
    │ record count    u32  │ min timestamp  i64  │ max timestamp  i64  │
    ├──────────────┬───────┴──────┬──────────────┴─────────────────────┤
    │ log2 bits u8 │ hashes k u8  │ Bloom filter of value tokens, 2**log2 bits
    └──────────────┴──────────────┴────────────────────────────────────┘

Tokens are the maximal runs of 3 or more ``[0-9A-Za-z_]`` bytes in record values
(:func:`tokens_of`). Bloom bit ``i`` of a token is ``(h1 + i*h2) mod 2**log2`` where
``h1``/``h2`` are the halves of xxh3-64(``w:`` + token).

Invariant: a block whose filter lacks a token holds no record value with that token, and
no record with a timestamp outside ``[min, max]``. A search for a substring may use only
the tokens the substring bounds on both sides (:func:`bounded_tokens`): ``4711`` inside
``x4711y`` is not the token ``4711``. (ClickHouse's ``tokenbf`` has the same rule.)
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import xxhash

KIND = ord("S")
SUFFIX = ".skip"
TOKEN = re.compile(rb"[0-9A-Za-z_]{3,}")
_TOKEN_BYTE = re.compile(rb"[0-9A-Za-z_]")
_SUMMARY = struct.Struct(">IqqBB")
_HASHES = 2
_BITS_PER_TOKEN = 16
_MIN_LOG2 = 6
_U32 = 0xFFFFFFFF


def tokens_of(values: Iterable[bytes]) -> set[bytes]:
    """The distinct tokens of some record values (values are never glued together)."""
    return set(TOKEN.findall(b"\n".join(values)))


def bounded_tokens(text: bytes) -> list[bytes]:
    """Tokens of ``text`` with a non-token byte on both sides inside ``text``: the only
    ones a value containing ``text`` is sure to hold as whole tokens."""
    out = []
    for m in TOKEN.finditer(text):
        start, end = m.span()
        if start > 0 and end < len(text):
            out.append(m.group())
    return out


def whole_tokens(text: bytes) -> list[bytes]:
    """All tokens of ``text``, for text known to be delimited in the value (a JSON
    string between its quotes)."""
    return TOKEN.findall(text)


@dataclass(frozen=True, slots=True)
class SkipSummary:
    """The decoded payload of one ``.skip`` block."""

    record_count: int
    min_timestamp: int
    max_timestamp: int
    log2_bits: int
    hashes: int
    bloom: bytes

    def may_contain(self, token: bytes) -> bool:
        """False only if no value of the block holds ``token``."""
        mask = (1 << self.log2_bits) - 1
        d = token_digest(token)
        h1, h2 = d & _U32, (d >> 32) | 1
        bloom = self.bloom
        for i in range(self.hashes):
            bit = (h1 + i * h2) & mask
            if not bloom[bit >> 3] & (1 << (bit & 7)):
                return False
        return True

    def overlaps(self, start_ms: int | None, end_ms: int | None) -> bool:
        """Whether a record of this block may have a timestamp in ``[start, end)``."""
        if self.record_count == 0:
            return False
        if start_ms is not None and self.max_timestamp < start_ms:
            return False
        return end_ms is None or self.min_timestamp < end_ms


def token_digest(token: bytes) -> int:
    """The 64-bit hash a token's Bloom bits are taken from."""
    return xxhash.xxh3_64_intdigest(b"w:" + token)


def bloom_of(digests: Iterable[int]) -> tuple[int, bytes]:
    """(log2 of the bit count, filter) for distinct token digests: 16-32 bits and 2
    hashes a token, at most 1.4 % false positives."""
    digests = list(digests)
    log2 = _MIN_LOG2
    while (1 << log2) < _BITS_PER_TOKEN * len(digests):
        log2 += 1
    mask = (1 << log2) - 1
    bloom = bytearray(1 << (log2 - 3))
    for i in range(_HASHES):  # bit i of a token: (h1 + i*h2) mod 2**log2, as may_contain reads it
        for bit in [((d & _U32) + i * ((d >> 32) | 1)) & mask for d in digests]:
            bloom[bit >> 3] |= 1 << (bit & 7)
    return log2, bytes(bloom)


def encode_summary(record_count: int, min_ts: int, max_ts: int, log2: int, bloom: bytes) -> bytes:
    """A block payload from its parts (:func:`bloom_of` gives the last two)."""
    return _SUMMARY.pack(record_count, min_ts, max_ts, log2, _HASHES) + bloom


def decode_payload(payload: bytes) -> SkipSummary:
    count, min_ts, max_ts, log2, hashes = _SUMMARY.unpack_from(payload)
    return SkipSummary(count, min_ts, max_ts, log2, hashes, payload[_SUMMARY.size :])
