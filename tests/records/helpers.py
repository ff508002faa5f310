"""Shared sample records, Hypothesis strategies and byte-patching helpers."""

from __future__ import annotations

from collections.abc import Sequence

import cramjam
import crc32c
from hypothesis import strategies as st

from logtrove.records import Compression, NewRecord, Record, build_batch, read_header
from logtrove.records.batch import CRC_START, HEADER

CRC_FIELD = slice(17, CRC_START)
ALL_CODECS = tuple(Compression)
COMPRESSED_CODECS = tuple(c for c in Compression if c is not Compression.NONE)

# ── byte patching ──────────────────────────────────────────────────────────────


def recompute_crc(buf: bytearray) -> bytearray:
    """Rewrite the stored CRC32C so that it covers the (edited) bytes [21, end)."""
    buf[CRC_FIELD] = crc32c.crc32c(bytes(buf[CRC_START:])).to_bytes(4, "big")
    return buf


def patch_header(batch: bytes, *, fix_crc: bool = True, **fields: int) -> bytearray:
    """A copy of ``batch`` with some header fields replaced (by BatchHeader name)."""
    header = read_header(batch)._replace(**fields)
    buf = bytearray(batch)
    HEADER.pack_into(buf, 0, *header)
    return recompute_crc(buf) if fix_crc else buf


def with_payload(batch: bytes, payload: bytes) -> bytearray:
    """``batch`` with its records section replaced; batchLength and CRC follow."""
    header = read_header(batch)
    buf = bytearray(batch[: HEADER.size] + payload)
    length = header.batch_length - (header.size - HEADER.size) + len(payload)
    HEADER.pack_into(buf, 0, *header._replace(batch_length=length))
    return recompute_crc(buf)


# ── expected values ────────────────────────────────────────────────────────────


def expected_records(records: Sequence[NewRecord], base_offset: int = 0) -> list[Record]:
    """What decoding a batch built from ``records`` (all timestamped) must give."""
    out = []
    for i, r in enumerate(records):
        assert r.timestamp is not None
        out.append(Record(base_offset + i, r.timestamp, r.key, r.value, tuple(r.headers)))
    return out


def client_record(r: object) -> Record:
    """A record decoded by kafka-python or aiokafka, as one of ours."""
    headers = tuple((name, value) for name, value in r.headers)  # type: ignore[attr-defined]
    return Record(r.offset, r.timestamp, r.key, r.value, headers)  # type: ignore[attr-defined]


# ── sample data ────────────────────────────────────────────────────────────────

T0 = 1_700_000_000_000


def sample_records() -> list[NewRecord]:
    """Hand-picked edge cases: null and empty keys/values, headers with null values,
    repeated and non-ASCII header names, timestamps that go back, jump and repeat."""
    return [
        NewRecord(b"first value", key=b"key-1", timestamp=T0),
        NewRecord(b"no key", key=None, timestamp=T0 + 5),
        NewRecord(None, key=b"tombstone", timestamp=T0 + 3),  # goes back in time
        NewRecord(b"", key=b"", timestamp=T0 + 3),
        NewRecord(None, key=None, timestamp=T0 - 60_000),
        NewRecord(
            b"with headers",
            key=b"key-2",
            headers=(("trace", b"abc"), ("null", None), ("empty", b""), ("trace", b"again")),
            timestamp=T0 + 86_400_000,
        ),
        NewRecord(b"\x00\xff" * 40, key=b"\xff" * 3, headers=(("ünïcødé-名前", b"\x00"),), timestamp=0),
        NewRecord(b"same ts", key=b"k", timestamp=T0),
    ]


def many_records(n: int = 2000) -> list[NewRecord]:
    """A large, compressible batch (so that clients really compress it)."""
    return [
        NewRecord(
            value=b"order %06d status=shipped warehouse=eu-west-1 " % i * 3,
            key=None if i % 7 == 0 else b"customer-%d" % (i % 50),
            headers=(("seq", str(i).encode()),) if i % 3 == 0 else (),
            timestamp=T0 + i * 10 - (i % 5) * 3,
        )
        for i in range(n)
    ]


def build(records: Sequence[NewRecord], codec: Compression = Compression.NONE, **kwargs: int) -> bytes:
    return build_batch(records, compression=codec, **kwargs)  # type: ignore[arg-type]


# ── Hypothesis strategies ──────────────────────────────────────────────────────

maybe_bytes = st.none() | st.binary(max_size=48)
headers_st = st.lists(st.tuples(st.text(max_size=12), maybe_bytes), max_size=4).map(tuple)
timestamps = st.integers(min_value=0, max_value=2**45)
new_records = st.builds(
    NewRecord, value=maybe_bytes, key=maybe_bytes, headers=headers_st, timestamp=timestamps
)
record_lists = st.lists(new_records, min_size=1, max_size=25)
codecs = st.sampled_from(ALL_CODECS)


def zeros_frame(module: object, size: int) -> bytes:
    """A compressed frame of ``size`` zero bytes, written 4 MiB at a time (a decompression
    bomb: 1 GiB is about 34 KB in zstd); ``module`` is ``cramjam.zstd``, ``.gzip`` or ``.lz4``."""
    compressor = module.Compressor()  # type: ignore[attr-defined]
    chunk = bytes(4 << 20)
    for _ in range(size // len(chunk)):
        compressor.compress(chunk)
    return bytes(compressor.finish())


def zstd_zeros(size: int) -> bytes:
    return zeros_frame(cramjam.zstd, size)
