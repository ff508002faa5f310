"""The compiled indexer loop and its pure-Python twin give the same index bytes.

Random batches (null and repeated keys, null values, tokens of every length, message
IDs, tags — null, repeated, several in one record —, indexed and other headers,
out-of-order and far-apart timestamps, LogAppendTime, gaps in offsets) are fed to both
``Pending`` implementations; every output must be byte-equal and agree with what the
records say (read back with the general record decoder). Malformed batches must raise
``ValueError`` in both and leave the block as it was.
"""

from __future__ import annotations

from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logtrove.records import NewRecord, build_batch, read_header
from logtrove.records.record import batch_payload, iter_records
from logtrove.storage.derived import keyindex, skipindex, tagindex
from logtrove.storage.derived.blockentries import NATIVE, Pending, PyPending

ID, TAG = b"id", b"tag"
INDEXED = {b"user": b"h:user:", b"shop": b"h:shop:"}


def test_the_compiled_loop_is_built() -> None:
    """``make install`` builds it (gcc and libxxhash-dev): without it the indexer falls
    back to pure Python, several times slower than produce."""
    assert NATIVE is not None, (
        "logtrove.storage.derived._indexcore is missing: install gcc and libxxhash-dev, then `make install`"
    )


def implementations() -> list[Pending]:
    assert NATIVE is not None
    return [PyPending(ID, TAG, INDEXED), NATIVE.Pending(ID, TAG, INDEXED)]


def outputs(p: Pending) -> tuple[object, ...]:
    return (p.records, p.min_ts, p.max_ts, p.key_table(), p.bloom(), p.tag_entries(), p.tag_counts())


words = st.sampled_from([b"ab", b"abc", b"order_42", b"\xff\xfe", b"x" * 300, b"", b'{"a": 1}', b"paid"])
values = st.one_of(st.none(), st.lists(words, max_size=6).map(b" ".join), st.binary(max_size=200))
header_names = st.sampled_from(["id", "tag", "user", "shop", "other", ""])
headers = st.lists(
    st.tuples(header_names, st.one_of(st.none(), st.sampled_from([b"a", b"b", b""]), st.binary(max_size=20))),
    max_size=5,
)
records = st.builds(
    NewRecord,
    value=values,
    key=st.one_of(st.none(), st.sampled_from([b"k1", b"k2", b""]), st.binary(max_size=40)),
    headers=headers.map(tuple),
    timestamp=st.integers(0, 2**41),
)
batches = st.lists(
    st.tuples(st.lists(records, min_size=1, max_size=20), st.booleans(), st.integers(0, 1000)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches)
def test_both_implementations_give_the_same_bytes(spec: list[tuple[list[NewRecord], bool, int]]) -> None:
    pendings = implementations()
    base = 0
    for recs, log_append_time, gap in spec:
        base += gap
        batch = build_batch(recs, base_offset=base, log_append_time=log_append_time)
        header = read_header(batch)
        append_ts = header.max_timestamp if log_append_time else None
        payload = batch_payload(batch, header)
        counts = [p.add(payload, base, header.base_timestamp, append_ts) for p in pendings]
        assert counts == [len(recs)] * 2
        base += len(recs)
    py, compiled = (outputs(p) for p in pendings)
    assert py == compiled


def test_outputs_agree_with_the_records() -> None:
    recs = [
        NewRecord(b"order 4711 paid", b"k1", (("id", b"m1"), ("tag", b"TagA"), ("user", b"u1")), 5_000),
        NewRecord(None, None, (("tag", b"TagA"), ("tag", None)), 4_000),
        NewRecord(b"xy refund", b"k1", (("tag", b"TagB"), ("shop", b"s1")), 6_000),
    ]
    batch = build_batch(recs, base_offset=10)
    header = read_header(batch)
    for p in implementations():
        assert p.add(batch_payload(batch, header), 10, header.base_timestamp, None) == 3
        assert (p.min_ts, p.max_ts) == (4_000, 6_000)
        expected = [
            (keyindex.key_digest(b"k1"), 10),
            (keyindex.id_digest(b"m1"), 10),
            (keyindex.header_digest("user", b"u1"), 10),
            (keyindex.key_digest(b"k1"), 12),
            (keyindex.header_digest("shop", b"s1"), 12),
        ]
        table = p.key_table()
        assert table == keyindex.encode_table(
            array("Q", [d for d, _ in expected]), array("I", [r for _, r in expected])
        )
        assert keyindex.encode_names(("id", "user", "shop")) + table == keyindex.encode_payload(
            ("id", "user", "shop"), array("Q", [d for d, _ in expected]), array("I", [r for _, r in expected])
        )
        assert p.tag_counts() == {b"TagA": 1, b"TagB": 1}  # the null tag header cleared TagA
        assert p.tag_entries() == tagindex.encode_entries(
            array("I", [10, 12]), array("I", [tagindex.tag_hash(b"TagA"), tagindex.tag_hash(b"TagB")])
        )
        log2, bits = p.bloom()
        summary = skipindex.decode_payload(skipindex.encode_summary(3, 4_000, 6_000, log2, bits))
        assert all(summary.may_contain(t) for t in (b"order", b"4711", b"paid", b"refund"))
        assert not summary.may_contain(b"xy")  # shorter than a token: never indexed


def test_log_append_time_batches_take_the_batch_time() -> None:
    batch = build_batch([NewRecord(b"v", timestamp=1), NewRecord(b"w", timestamp=2)], log_append_time=True)
    header = read_header(batch)
    for p in implementations():
        p.add(batch_payload(batch, header), 0, header.base_timestamp, header.max_timestamp)
        assert (p.min_ts, p.max_ts) == (header.max_timestamp, header.max_timestamp)


@pytest.mark.parametrize("cut", [1, 2, 5, 9, 17, 30])
def test_a_malformed_batch_raises_and_changes_nothing(cut: int) -> None:
    good = build_batch([NewRecord(b"first value", b"k0", (("id", b"m0"), ("tag", b"T")), 100)])
    bad = build_batch(
        [NewRecord(b"second value", b"k1", (("id", b"m1"), ("tag", b"T")), 200)] * 2, base_offset=1
    )
    good_payload = batch_payload(good, read_header(good))
    bad_payload = bytes(batch_payload(bad, read_header(bad)))
    broken = bad_payload[: len(bad_payload) - cut]
    for p in implementations():
        p.add(good_payload, 0, 100, None)
        before = (p.records, p.min_ts, p.max_ts, p.key_table(), p.tag_entries(), p.tag_counts())
        with pytest.raises(ValueError, match="malformed"):
            p.add(broken, 1, 200, None)
        assert (p.records, p.min_ts, p.max_ts, p.key_table(), p.tag_entries(), p.tag_counts()) == before


def test_a_length_past_the_batch_is_refused() -> None:
    for p in implementations():
        with pytest.raises(ValueError, match="malformed"):
            p.add(b"\x7e\x00\x00\x00", 0, 0, None)  # length 63, 3 bytes follow
        with pytest.raises(ValueError, match="malformed"):
            p.add(b"\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 0, 0, None)  # runaway varint
        assert p.records == 0


def test_records_agree_with_the_general_decoder() -> None:
    """Cross-check against iter_records: what the loop counts is what the log holds."""
    recs = [NewRecord(b"v%d" % i, b"k%d" % (i % 3), (("id", b"m%d" % i),), 1000 + i) for i in range(500)]
    batch = build_batch(recs, base_offset=7)
    header = read_header(batch)
    decoded = list(iter_records(batch))
    for p in implementations():
        assert p.add(batch_payload(batch, header), 7, header.base_timestamp, None) == len(decoded)
        assert (p.min_ts, p.max_ts) == (min(r.timestamp for r in decoded), max(r.timestamp for r in decoded))


@settings(max_examples=500, deadline=None)
@given(st.lists(records, min_size=1, max_size=5), st.data())
def test_damaged_batches_raise_value_error_or_parse(recs: list[NewRecord], data: st.DataObject) -> None:
    """Bytes flipped, cut or appended anywhere in a records section: the compiled loop
    either parses it or raises ValueError, and so does its twin. (_indexcore.c says how
    to run this under AddressSanitizer.)"""
    batch = build_batch(recs)
    payload = bytearray(batch_payload(batch, read_header(batch)))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    payload = payload[: data.draw(st.integers(0, len(payload)))] + data.draw(st.binary(max_size=8))
    for p in implementations():
        try:
            count = p.add(bytes(payload), 0, 0, None)
        except ValueError:
            assert p.records == 0
        else:
            assert p.records == count >= 0
            p.key_table(), p.bloom(), p.tag_entries()
