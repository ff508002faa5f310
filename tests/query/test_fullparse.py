"""The content search's full-parse stage (:mod:`logtrove.query.fullparse`) picks exactly
the records that testing every record one by one picks: random batches (null, empty,
multi-line values), every kind of predicate and regexes with anchors, word boundaries,
empty matches and flags, offset ranges and time windows cutting the batch."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from logtrove.query import Contains, JsonField, Regex
from logtrove.query.fullparse import batch_decoder, matching_offsets
from logtrove.query.predicates import Predicate
from logtrove.records import NewRecord, build_batch, iter_records, read_header
from logtrove.records.record import batch_payload

ALPHABET = b'ab \n\x00{}":1xyz\\'
PATTERNS = [
    "ab",
    "a.b",
    "x*",
    "^a",
    "b$",
    "^$",
    "^",
    r"\ba\b",
    r"\Bb",
    r"\Aa",
    r"b\z",
    "(?-m:^a)",
    "(?i)^AB",
    r"\Qa\E$",
    r"\Qab",
    "a\nb",
    "(?s)a.b",
    "[^a]+$",
    '"a":1',
]
PREDICATES: list[Predicate] = [
    *(Regex(p) for p in PATTERNS),
    Contains("ab"),
    Contains("\n"),
    Contains(b"\x00"),
    JsonField("a", "1"),
    JsonField("a", "ab"),
    JsonField("a", "true"),
]
values = st.one_of(
    st.none(), st.binary(max_size=12).map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b))
)


def brute_force(
    batch: bytes, predicate: Predicate, begin: int, end: int, window: tuple[int | None, int | None]
) -> set[int]:
    lo, hi = window
    return {
        r.offset
        for r in iter_records(batch)
        if begin <= r.offset < end
        and (lo is None or r.timestamp >= lo)
        and (hi is None or r.timestamp < hi)
        and predicate.matches(r.value)
    }


def _regex(pattern: str) -> int:
    return PATTERNS.index(pattern)


@settings(max_examples=300, deadline=None)
@example([b"b", b"ab"], _regex(r"\Aa"), (0, 9), (None, None))  # \A: the start of the value only
@example([b"b", b"xb"], _regex(r"b\z"), (0, 9), (None, None))
@example([b"b", b"ab"], _regex("(?-m:^a)"), (0, 9), (None, None))
@example([b"a", b"", None, b""], _regex("^$"), (0, 9), (None, None))  # empty values, a null
@given(
    batch_values=st.lists(values, min_size=1, max_size=30),
    which=st.integers(0, len(PREDICATES) - 1),
    cut=st.tuples(st.integers(0, 40), st.integers(0, 40)),
    window=st.tuples(st.none() | st.integers(990, 1040), st.none() | st.integers(990, 1040)),
)
def test_full_parse_picks_what_testing_every_record_picks(
    batch_values: list[bytes | None],
    which: int,
    cut: tuple[int, int],
    window: tuple[int | None, int | None],
) -> None:
    base = 7
    records = [NewRecord(v, timestamp=1000 + (i * 7) % 30) for i, v in enumerate(batch_values)]
    batch = build_batch(records, base_offset=base)
    header = read_header(batch)
    predicate = PREDICATES[which]
    begin, end = base + min(cut), base + max(cut)
    payload = bytes(batch_payload(batch, header))
    got = matching_offsets(batch_decoder(), payload, header, predicate, begin, end, window)
    assert got == brute_force(batch, predicate, begin, end, window)


def test_a_batch_with_a_wrong_record_count_is_left_to_the_record_by_record_walk() -> None:
    batch = bytearray(build_batch([NewRecord(b"ab"), NewRecord(b"ab")]))
    header = read_header(bytes(batch))
    lying = header._replace(record_count=3)
    payload = bytes(batch_payload(bytes(batch), header))
    assert matching_offsets(batch_decoder(), payload, lying, Contains("ab"), 0, None, (None, None)) is None
    assert matching_offsets(batch_decoder(), payload, header, Contains("ab"), 0, None, (None, None)) == {0, 1}


def test_a_malformed_batch_is_left_to_the_record_by_record_walk() -> None:
    batch = build_batch([NewRecord(b"ab"), NewRecord(b"ab")])
    header = read_header(batch)
    payload = bytes(batch_payload(batch, header))
    assert (
        matching_offsets(batch_decoder(), payload[:-3], header, Contains("ab"), 0, None, (None, None)) is None
    )
