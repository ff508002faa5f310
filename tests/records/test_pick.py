"""Picking records for lookups: the compiled pickers and their pure-Python twins agree
on valid, damaged and random payloads (the same values or the same ValueError), and
whatever a picker accepts, the row-wise readers give the same records for."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.records.helpers import patch_header, with_payload

from logtrove.records import (
    Compression,
    CorruptRecordError,
    NewRecord,
    Record,
    RecordsError,
    build_batch,
    iter_records,
    read_header,
)
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE
from logtrove.records.pick import (
    NATIVE,
    first_stamped,
    py_count_times,
    py_find_record,
    py_pick_offset,
    py_pick_window,
    py_time_bounds,
)
from logtrove.records.record import batch_payload, decode_record, encode_record, record_span, timestamp_bounds
from logtrove.records.varint import encode_varint

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASE_OFFSET = 1000
BASE_TS = 1_700_000_000_000


def test_the_compiled_pickers_are_built() -> None:
    assert NATIVE is not None, "logtrove.records._walk lacks the pickers: rebuild it (`make install`)"


def outcome(fn: object, *args: object) -> object:
    try:
        return fn(*args)  # type: ignore[operator]
    except ValueError as exc:
        return f"ValueError: {exc}"


def both_window(payload: bytes, *args: object) -> object:
    assert NATIVE is not None
    results = [outcome(f, payload, *args) for f in (py_pick_window, NATIVE.pick_window)]
    assert results[0] == results[1], results
    return results[0]


def both_offset(payload: bytes, *args: object) -> object:
    assert NATIVE is not None
    results = [outcome(f, payload, *args) for f in (py_pick_offset, NATIVE.pick_offset)]
    assert results[0] == results[1], results
    return results[0]


records = st.builds(
    NewRecord,
    value=st.one_of(st.none(), st.binary(max_size=40)),
    key=st.one_of(st.none(), st.binary(max_size=12)),
    headers=st.lists(
        st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8))), max_size=3
    ).map(tuple),
    timestamp=st.integers(BASE_TS - 3000, BASE_TS + 3000),
)
window_bound = st.one_of(st.none(), st.integers(BASE_TS - 3500, BASE_TS + 3500))
append_ts = st.one_of(st.none(), st.integers(BASE_TS - 3500, BASE_TS + 3500))


def batch_of(recs: list[NewRecord]) -> tuple[bytes, bytes]:
    batch = build_batch(recs, base_offset=BASE_OFFSET)
    return batch, bytes(batch_payload(batch, read_header(batch)))


def damaged(payload: bytes, data: st.DataObject) -> bytes:
    out = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(out) - 1))
        out[i] = data.draw(st.integers(0, 255))
    return bytes(out[: data.draw(st.integers(0, len(out)))])


def rowwise_window(
    batch: bytes,
    payload: bytes,
    count: int,
    appended: int | None,
    start: int | None,
    end: int | None,
    lo: int,
    hi: int,
) -> list[Record]:
    """What the range scan's row-wise path decodes for this payload, ``count`` records."""
    header = read_header(batch)
    buf = with_payload(batch, payload)
    attributes = header.attributes | (ATTR_TIMESTAMP_TYPE if appended is not None else 0)
    patched = read_header(buf)._replace(
        base_offset=BASE_OFFSET,
        base_timestamp=BASE_TS,
        record_count=count,
        attributes=attributes,
        max_timestamp=appended if appended is not None else 0,
    )
    return [
        r
        for r in iter_records(bytes(buf), 0, patched)
        if lo <= r.offset < hi
        and (start is None or r.timestamp >= start)
        and (end is None or r.timestamp < end)
    ]


def check_window(batch: bytes, payload: bytes, data: st.DataObject) -> None:
    appended = data.draw(append_ts)
    start, end = data.draw(window_bound), data.draw(window_bound)
    lo = data.draw(st.integers(BASE_OFFSET - 2, BASE_OFFSET + 10))
    hi = data.draw(st.integers(lo, BASE_OFFSET + 25))
    limit = data.draw(st.one_of(st.just(-1), st.integers(0, 4)))
    got = both_window(payload, BASE_OFFSET, BASE_TS, appended, start, end, lo, hi, limit)
    if got is None or isinstance(got, str):
        return
    assert isinstance(got, tuple)
    count, picked = got
    expected = rowwise_window(batch, payload, count, appended, start, end, lo, hi)
    assert [Record(*t) for t in picked] == (expected if limit < 0 else expected[:limit])
    if limit >= 0:  # a limit spares decoding, never checking: the same records are counted
        unlimited = both_window(payload, BASE_OFFSET, BASE_TS, appended, start, end, lo, hi, -1)
        assert isinstance(unlimited, tuple) and unlimited[0] == count


def check_offset(batch: bytes, payload: bytes, data: st.DataObject, *, rowwise: bool = True) -> None:
    """The twins agree; with ``rowwise``, also with the row-wise point lookup. That one
    jumps by record count to where a dense batch holds the offset, the pickers walk the
    framing in order: on bytes that contradict themselves (a record count or offset
    deltas that do not fit the records) each reads them its own way, so only payloads
    that still decode whole, with rising offsets, are compared with it."""
    appended = data.draw(append_ts)
    offset = data.draw(st.integers(BASE_OFFSET - 2, BASE_OFFSET + 25))
    got = both_offset(payload, BASE_OFFSET, BASE_TS, appended, offset)
    if isinstance(got, str):
        return
    header = read_header(batch)._replace(
        base_offset=BASE_OFFSET,
        base_timestamp=BASE_TS,
        attributes=ATTR_TIMESTAMP_TYPE if appended is not None else 0,
        max_timestamp=appended if appended is not None else 0,
    )
    if not rowwise:
        return
    span = record_span(payload, header, offset)  # the row-wise point lookup
    expected = (
        None if span is None or span[0] != offset else decode_record(payload[span[1] : span[2]], header)
    )
    assert (None if got is None else Record(*got)) == expected  # type: ignore[misc]


@SETTINGS
@given(st.lists(records, min_size=1, max_size=20), st.data())
def test_valid_batches_give_what_a_full_decode_gives(recs: list[NewRecord], data: st.DataObject) -> None:
    batch, payload = batch_of(recs)
    check_window(batch, payload, data)
    check_offset(batch, payload, data)


@SETTINGS
@given(st.lists(records, min_size=1, max_size=8), st.data())
def test_damaged_payloads_are_refused_or_read_as_the_row_wise_readers_do(
    recs: list[NewRecord], data: st.DataObject
) -> None:
    batch, payload = batch_of(recs)
    bad = damaged(payload, data)
    check_window(batch, bad, data)
    check_offset(batch, bad, data, rowwise=consistent(batch, bad))


def consistent(batch: bytes, payload: bytes) -> bool:
    """Whether ``payload`` decodes whole as the batch's records, offsets rising."""
    try:
        found = list(iter_records(bytes(with_payload(batch, payload)), 0))
    except RecordsError:
        return False
    offsets = [r.offset for r in found]
    return len(found) == read_header(batch).record_count and offsets == sorted(set(offsets))


@SETTINGS
@given(st.binary(max_size=200), st.integers(-5, 5), window_bound, window_bound)
def test_twins_agree_on_random_bytes(payload: bytes, offset: int, start: int | None, end: int | None) -> None:
    both_window(payload, 0, BASE_TS, None, start, end, -10, 10)
    both_offset(payload, 0, BASE_TS, None, offset)


def test_a_window_no_record_meets_is_refused_from_timestamps_alone() -> None:
    recs = [NewRecord(b"v", b"k", (), BASE_TS + i) for i in range(5)]
    _, payload = batch_of(recs)
    broken_value = payload[:-3] + b"\x7f\x7f\x7f"  # the last record's fields are damaged
    assert both_window(broken_value, BASE_OFFSET, BASE_TS, None, BASE_TS + 100, None, 0, 2**63 - 1) is None
    assert "record 4" in str(
        both_window(broken_value, BASE_OFFSET, BASE_TS, None, BASE_TS, None, 0, 2**63 - 1)
    )


def test_only_the_records_asked_for_are_decoded_and_the_count_covers_all() -> None:
    recs = [NewRecord(b"v%d" % i, b"k", (("h", b"x"),), BASE_TS + 10 * i) for i in range(6)]
    _, payload = batch_of(recs)
    got = both_window(
        payload, BASE_OFFSET, BASE_TS, None, BASE_TS + 15, BASE_TS + 45, BASE_OFFSET + 3, 2**63 - 1
    )
    assert got == (
        6,
        [
            (BASE_OFFSET + 3, BASE_TS + 30, b"k", b"v3", (("h", b"x"),)),
            (BASE_OFFSET + 4, BASE_TS + 40, b"k", b"v4", (("h", b"x"),)),
        ],
    )
    assert both_offset(payload, BASE_OFFSET, BASE_TS, BASE_TS + 99, BASE_OFFSET + 5) == (
        BASE_OFFSET + 5,
        BASE_TS + 99,
        b"k",
        b"v5",
        (("h", b"x"),),
    )
    assert both_offset(payload, BASE_OFFSET, BASE_TS, None, BASE_OFFSET + 6) is None


def one_record(offset_delta: int, tail: bytes) -> bytes:
    body = b"\x00" + encode_varint(0) + encode_varint(offset_delta) + tail
    return encode_varint(len(body)) + body


NULLS = encode_varint(-1) + encode_varint(-1)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            encode_record(0, 0, NewRecord(b"a")) + encode_record(0, 0, NewRecord(b"b")),
            "record 1: its offset delta",
        ),
        (one_record(0, NULLS + encode_varint(0) + b"zz"), "left over"),
        (one_record(0, encode_varint(-1) + encode_varint(50) + b"short"), "truncated value"),
        (one_record(0, NULLS + encode_varint(-3)), "bad header count"),
        (
            one_record(0, NULLS + encode_varint(1) + encode_varint(2) + b"\xff\xfe" + encode_varint(-1)),
            "UTF-8",
        ),
        (one_record(0, NULLS + encode_varint(1) + encode_varint(-1)), "truncated header name"),
        (encode_varint(10_000) + b"\x00" * 20, "length runs past"),
        (b"\x02\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", "length runs past"),
        (one_record(0, b"\x80" * 9 + b"\x02" + encode_varint(-1) + encode_varint(0)), "truncated key"),
    ],
    ids=[
        "delta-not-rising",
        "trailing",
        "value",
        "header-count",
        "utf8",
        "null-name",
        "length",
        "long-varint",
        "64-bit",
    ],
)
def test_each_malformation_is_named_alike(payload: bytes, message: str) -> None:
    result = both_window(payload, 0, BASE_TS, None, None, None, 0, 100)
    assert isinstance(result, str) and message in result, result
    offset = both_offset(payload, 0, BASE_TS, None, 1)
    assert (isinstance(offset, str) and message in offset) or offset is None


def test_the_row_wise_reader_refuses_what_the_picker_refuses_here() -> None:
    payload = one_record(0, NULLS + encode_varint(0) + b"zz")
    batch = with_payload(build_batch([NewRecord(b"v")]), payload)
    with pytest.raises(CorruptRecordError):
        list(iter_records(bytes(batch)))


@SETTINGS
@given(st.lists(records, min_size=1, max_size=20), st.data())
def test_time_bounds_are_the_row_wise_bounds(recs: list[NewRecord], data: st.DataObject) -> None:
    assert NATIVE is not None
    batch, payload = batch_of(recs)
    header = read_header(batch)
    bounds = [outcome(f, payload, header.base_timestamp) for f in (py_time_bounds, NATIVE.time_bounds)]
    assert bounds[0] == bounds[1] == timestamp_bounds(payload, header)
    bad = damaged(payload, data)
    assert outcome(py_time_bounds, bad, BASE_TS) == outcome(NATIVE.time_bounds, bad, BASE_TS)


def both_count(payload: bytes, edges: list[int], min_offset: int) -> object:
    """Both twins' counts per bucket (or their error) for ``payload``, from zeroed counts."""
    assert NATIVE is not None
    results = []
    for f in (py_count_times, NATIVE.count_times):
        counts = array("q", [0] * (len(edges) - 1))
        got = outcome(f, payload, BASE_TS, BASE_OFFSET, min_offset, array("q", edges), counts)
        results.append((got, counts.tolist()))
    assert results[0] == results[1], results
    return results[0]


@SETTINGS
@given(
    st.lists(records, min_size=1, max_size=20),
    st.lists(st.integers(BASE_TS - 3500, BASE_TS + 3500), min_size=2, max_size=8, unique=True),
    st.integers(BASE_OFFSET - 2, BASE_OFFSET + 21),
    st.data(),
)
def test_count_times_counts_the_row_wise_timestamps_per_bucket(
    recs: list[NewRecord], edges: list[int], min_offset: int, data: st.DataObject
) -> None:
    edges.sort()
    batch = build_batch(recs, base_offset=BASE_OFFSET, base_timestamp=BASE_TS)
    payload = bytes(batch_payload(batch, read_header(batch)))
    expected = [0] * (len(edges) - 1)
    for r in iter_records(batch):
        for i in range(len(expected)):
            if r.offset >= min_offset and edges[i] <= r.timestamp < edges[i + 1]:
                expected[i] += 1
    assert both_count(payload, edges, min_offset) == (len(recs), expected)
    bad = damaged(payload, data)
    got, counts = both_count(bad, edges, min_offset)  # type: ignore[misc]
    if isinstance(got, str):
        assert counts == [0] * len(expected), "a refused batch adds nothing"


@SETTINGS
@given(st.binary(max_size=200), st.integers(BASE_OFFSET - 3, BASE_OFFSET + 3))
def test_count_times_twins_agree_on_random_bytes(payload: bytes, min_offset: int) -> None:
    both_count(payload, [BASE_TS - 2**40, BASE_TS, BASE_TS + 2**40], min_offset)


def test_count_times_refuses_edges_that_do_not_fit_the_counts() -> None:
    assert NATIVE is not None
    for f in (py_count_times, NATIVE.count_times):
        with pytest.raises(ValueError, match="one int64 more"):
            f(b"", BASE_TS, BASE_OFFSET, 0, array("q", [1, 2]), array("q", [0, 0]))


def first_rowwise(data: bytes, min_offset: int, timestamp: int) -> object:
    """What time lookups did: walk the batch row by row to the first record stamped late
    enough (or the error the walk met)."""
    try:
        for record in iter_records(data):
            if record.offset >= min_offset and record.timestamp >= timestamp:
                return record
        return None
    except RecordsError as exc:
        return type(exc)


@SETTINGS
@given(st.lists(records, min_size=1, max_size=12), st.booleans(), st.data())
def test_first_stamped_is_the_row_wise_walk(recs: list[NewRecord], damage: bool, data: st.DataObject) -> None:
    batch, payload = batch_of(recs)
    if damage:
        batch = bytes(with_payload(batch, damaged(payload, data)))
    min_offset = data.draw(st.integers(BASE_OFFSET - 1, BASE_OFFSET + 13))
    timestamp = data.draw(st.integers(BASE_TS - 3100, BASE_TS + 3100))
    try:
        got: object = first_stamped(batch, read_header(batch), min_offset, timestamp)
    except RecordsError as exc:
        got = type(exc)
    assert got == first_rowwise(batch, min_offset, timestamp)


def both_find(buf: bytes, room: int, offset: int) -> object:
    assert NATIVE is not None
    results = [outcome(f, buf, room, offset) for f in (py_find_record, NATIVE.find_record)]
    assert results[0] == results[1], results
    return results[0]


def log_of(batches: list[list[NewRecord]], data: st.DataObject) -> tuple[bytes, list[int]]:
    """Batches back to back as a log holds them, some compressed, some stamped at append
    time, with gaps between their offsets (as compaction leaves); and each batch's base."""
    out, bases, base = bytearray(), [], BASE_OFFSET
    for recs in batches:
        base += data.draw(st.integers(0, 3))
        codec = data.draw(st.sampled_from([Compression.NONE, Compression.NONE, Compression.GZIP]))
        batch = build_batch(recs, base_offset=base, compression=codec)
        if data.draw(st.booleans()):
            batch = patch_header(batch, attributes=read_header(batch).attributes | ATTR_TIMESTAMP_TYPE)
        bases.append(base)
        out += batch
        base += len(recs)
    return bytes(out), bases


def expected_find(log: bytes, n: int, room: int, offset: int) -> object:
    """What ``find_record`` must answer, from the row-wise readers: the batches of
    ``log[:room]`` walked by header to the first whose last offset is ≥ ``offset``."""
    rel = 0
    while rel + 61 <= n:
        header = read_header(log, rel)
        if header.size > room - rel:
            return -1
        if header.last_offset < offset:
            rel += header.size
            continue
        if header.size > n - rel:
            return -1
        if header.base_offset > offset:
            return None
        if header.compression is not Compression.NONE:
            return rel
        hits = [r for r in iter_records(log, rel, header) if r.offset == offset]
        return header.size, (hits[0] if hits else None)
    return -1


@SETTINGS
@given(st.lists(st.lists(records, min_size=1, max_size=6), min_size=1, max_size=5), st.data())
def test_a_candidate_is_found_among_whole_batches_as_the_row_wise_readers_find_it(
    batches: list[list[NewRecord]], data: st.DataObject
) -> None:
    log, bases = log_of(batches, data)
    n = data.draw(st.integers(0, len(log)))  # the first read may end mid-batch
    room = data.draw(st.sampled_from([len(log), n, data.draw(st.integers(0, len(log)))]))
    room = max(room, n)
    offset = data.draw(st.integers(BASE_OFFSET - 2, bases[-1] + len(batches[-1]) + 2))
    got = both_find(log[:n], room, offset)
    if isinstance(got, tuple) and got[1] is not None:
        got = got[0], Record(*got[1])
    assert got == expected_find(log, n, room, offset)


@SETTINGS
@given(st.lists(st.lists(records, min_size=1, max_size=4), min_size=1, max_size=4), st.data())
def test_twins_find_alike_in_damaged_logs(batches: list[list[NewRecord]], data: st.DataObject) -> None:
    log, bases = log_of(batches, data)
    bad = damaged(log, data)
    room = data.draw(st.integers(len(bad) - 2, len(bad) + 100))
    offset = data.draw(st.integers(BASE_OFFSET - 2, bases[-1] + 6))
    both_find(bad, room, offset)


@SETTINGS
@given(st.binary(max_size=300), st.integers(-5, 300), st.integers(-5, 5))
def test_twins_find_alike_in_random_bytes(buf: bytes, room: int, offset: int) -> None:
    both_find(buf, room, offset)


def test_find_record_answers_each_case() -> None:
    plain = build_batch([NewRecord(b"a", b"k"), NewRecord(b"b", b"k")], base_offset=10)
    packed = build_batch([NewRecord(b"c", b"k")], base_offset=20, compression=Compression.GZIP)
    log = plain + packed
    at_11 = both_find(log, len(log), 11)
    assert isinstance(at_11, tuple) and at_11[0] == len(plain)
    assert Record(*at_11[1]) == list(iter_records(plain, 0))[1]
    assert both_find(log, len(log), 15) is None  # in the gap before offset 20
    assert both_find(log, len(log), 20) == len(plain)  # compressed: the caller decompresses
    assert both_find(log[: len(plain) + 30], len(log), 20) == -1  # that batch is cut short
    assert both_find(log, len(log) - 1, 20) == -1  # it runs past the log
    assert both_find(log, len(log), 21) == -1  # past every batch
    assert both_find(b"\x00" * 10, 100, 0) == -1
