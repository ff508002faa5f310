"""The columnar decoder: the compiled one and its pure-Python twin give the same bytes
and the same errors, and their Arrow batches equal the row-wise path's
(:class:`~logtrove.spark.columns.ColumnBuffer` over storage's decoded records)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logtrove.records import (
    Compression,
    CorruptRecordError,
    NewRecord,
    build_batch,
    columnar,
    iter_records,
    read_header,
)
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE
from logtrove.records.columnar import IMPLEMENTATION, NATIVE, PyDecoder, Taken, new_decoder
from logtrove.records.record import batch_payload
from logtrove.records.varint import encode_varint
from logtrove.spark.columns import ColumnBuffer, add_batch, arrow_batch
from logtrove.spark.direct import read_range
from logtrove.spark.options import RecordFilter
from logtrove.spark.ranges import OffsetRange
from logtrove.storage import Storage

requires_native = pytest.mark.skipif(NATIVE is None, reason="the compiled decoder is not built")
CODECS = list(Compression)
NAMES = ["id", "tag", "trace", "é", ""]


def _decoders(with_headers: bool, threshold: int = columnar.LARGE_THRESHOLD) -> list[Any]:
    found: list[Any] = [PyDecoder(b"id", b"tag", with_headers, threshold)]
    if NATIVE is not None:
        found.append(NATIVE.Decoder(b"id", b"tag", with_headers, threshold))
    return found


def _expected(batches: list[bytes], start: int, end: int, with_headers: bool) -> Any:
    """The row-wise path's Arrow batch: storage's records through ColumnBuffer."""
    buf = ColumnBuffer("t", 3, "id", "tag", with_headers)
    for data in batches:
        header = read_header(data)
        if header.is_control:
            continue
        for rec in iter_records(data, 0, header):
            if start <= rec.offset < end:
                buf.add(rec, bool(header.attributes & ATTR_TIMESTAMP_TYPE))
    return buf.take_batch()


def _decode_all(decoder: Any, batches: list[bytes], start: int, end: int) -> Taken:
    for data in batches:
        header = read_header(data)
        if not header.is_control:
            add_batch(decoder, data, header, start, end)
    taken: Taken = decoder.take()
    return taken


records_st = st.lists(
    st.builds(
        NewRecord,
        value=st.none() | st.binary(max_size=40),
        key=st.none() | st.binary(max_size=12),
        headers=st.lists(
            st.tuples(st.sampled_from(NAMES), st.none() | st.binary(max_size=8) | st.just(b"\xff\xfeA")),
            max_size=4,
        ).map(tuple),
        timestamp=st.integers(0, 2**42),
    ),
    min_size=1,
    max_size=12,
)
batches_st = st.lists(
    st.tuples(records_st, st.sampled_from(CODECS), st.booleans(), st.integers(0, 3)), min_size=1, max_size=4
)


def _build(specs: list[tuple[list[NewRecord], Compression, bool, int]]) -> list[bytes]:
    """Batches at increasing offsets (with gaps), some LogAppendTime, a control batch
    where the gap is 3."""
    out, offset = [], 100
    for records, codec, append_time, gap in specs:
        offset += gap
        if gap == 3:
            marker = NewRecord(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x00")
            out.append(
                build_batch([marker], base_offset=offset, control=True, transactional=True, producer_id=7)
            )
            offset += 1
        out.append(build_batch(records, base_offset=offset, compression=codec, log_append_time=append_time))
        offset += len(records)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches_st, st.integers(90, 180), st.integers(0, 90), st.booleans())
def test_twins_equal_each_other_and_the_row_wise_path(
    specs: list[tuple[list[NewRecord], Compression, bool, int]], start: int, span: int, with_headers: bool
) -> None:
    batches = _build(specs)
    expected = _expected(batches, start, start + span, with_headers)
    outputs = [_decode_all(d, batches, start, start + span) for d in _decoders(with_headers)]
    assert all(out == outputs[0] for out in outputs)
    assert outputs[0][0] == expected.num_rows
    for out in outputs:
        got = arrow_batch(out, "t", 3)
        got.validate(full=True)
        assert got.equals(expected)


def test_offset_range_cuts_a_batch_in_the_middle() -> None:
    batch = build_batch(
        [NewRecord(b"v%d" % i, b"k%d" % i, (("id", b"m%d" % i),)) for i in range(10)], base_offset=40
    )
    for decoder in _decoders(True):
        assert add_batch(decoder, batch, read_header(batch), 43, 47) == 4
        table = arrow_batch(decoder.take(), "t", 3)
        assert table.column("offset").to_pylist() == [43, 44, 45, 46]
        assert table.column("id").to_pylist() == ["m3", "m4", "m5", "m6"]
        assert table.column("headers").to_pylist()[0] == [{"key": "id", "value": b"m3"}]


def test_log_append_time_gives_every_record_the_batch_time() -> None:
    batch = build_batch([NewRecord(b"a", timestamp=5), NewRecord(b"b", timestamp=9)], log_append_time=True)
    header = read_header(batch)
    for decoder in _decoders(False):
        add_batch(decoder, batch, header, 0, 10)
        table = arrow_batch(decoder.take(), "t", 0)
        assert table.column("timestampType").to_pylist() == [1, 1]
        micros = table.column("timestamp").cast(pa.int64()).to_pylist()
        assert micros == [header.max_timestamp * 1000] * 2


def test_columns_past_the_threshold_come_as_large_types() -> None:
    """What a column past 2 GiB gets (int64 offsets, large_binary), at a small threshold."""
    batch = build_batch([NewRecord(b"value-%d" % i, b"k", (("tag", b"T"),) * 3) for i in range(20)])
    expected = _expected([batch], 0, 100, True)
    outputs = []
    for decoder in _decoders(True, threshold=50):
        outputs.append(_decode_all(decoder, [batch], 0, 100))
        table = arrow_batch(outputs[-1], "t", 3)
        table.validate(full=True)
        assert table.schema.field("value").type == pa.large_binary()
        assert table.schema.field("key").type == pa.binary()  # 20 bytes: under the threshold
        assert pa.types.is_large_list(table.schema.field("headers").type)  # 60 entries
        assert table.column("value").cast(pa.binary()).equals(expected.column("value"))
        assert table.column("headers").to_pylist() == expected.column("headers").to_pylist()
    assert all(out == outputs[0] for out in outputs)


def test_threshold_above_32_bit_offsets_is_refused() -> None:
    with pytest.raises(ValueError, match="large_threshold"):
        PyDecoder(b"id", b"tag", False, 2**31)
    if NATIVE is not None:
        with pytest.raises(ValueError, match="large_threshold"):
            NATIVE.Decoder(b"id", b"tag", False, 2**31)


def _raw_record(
    delta: int, key: bytes | None, value: bytes | None, headers: list[tuple[bytes, bytes | None]]
) -> bytes:
    def field(b: bytes | None) -> bytes:
        return encode_varint(-1) if b is None else encode_varint(len(b)) + b

    body = b"\x00" + encode_varint(0) + encode_varint(delta) + field(key) + field(value)
    body += encode_varint(len(headers)) + b"".join(field(n) + field(v) for n, v in headers)
    return encode_varint(len(body)) + body


def test_names_and_ids_that_are_not_utf8_are_replaced_alike() -> None:
    payload = _raw_record(0, b"k", b"v", [(b"\xffname", b"x"), (b"id", b"\xc3(ok"), (b"tag", b"caf\xc3\xa9")])
    outputs = []
    for decoder in _decoders(True):
        decoder.add(payload, 0, 0, None, 0, 1)
        outputs.append(decoder.take())
        table = arrow_batch(outputs[-1], "t", 0)
        table.validate(full=True)
        assert table.column("id").to_pylist() == ["\ufffd(ok"]
        assert table.column("tag").to_pylist() == ["café"]
        assert table.column("headers").to_pylist()[0][0]["key"] == "\ufffdname"
    assert all(out == outputs[0] for out in outputs)


def _outcome(decoder: Any, good: bytes, payload: bytes, start: int, end: int) -> tuple[Any, Taken]:
    """(the error text or None, then what the decoder holds): a failing batch must leave
    the rows of the batch before it as they were."""
    decoder.add(good, 0, 0, None, 0, 2**62)
    try:
        decoder.add(payload, 10, 1000, None, start, end)
        error = None
    except CorruptRecordError as exc:
        error = str(exc)
    return error, decoder.take()


GOOD = _raw_record(0, b"key", b"value", [(b"id", b"m1"), (b"tag", None)]) + _raw_record(1, None, b"", [])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.integers(0, 20), st.booleans())
def test_random_bytes_give_the_same_error_or_rows(payload: bytes, start: int, with_headers: bool) -> None:
    outcomes = [_outcome(d, GOOD, payload, start, start + 5) for d in _decoders(with_headers)]
    assert all(o == outcomes[0] for o in outcomes)
    if outcomes[0][0] is not None:
        assert outcomes[0][1][0] == 2  # the good batch's rows, nothing of the bad one


@settings(max_examples=300, deadline=None)
@given(st.data(), st.booleans())
def test_damaged_batches_give_the_same_error_or_rows(data: Any, with_headers: bool) -> None:
    records = data.draw(records_st)
    batch = build_batch(records, base_offset=10)
    payload = bytearray(batch_payload(batch, read_header(batch)))
    cut = data.draw(st.integers(0, len(payload)))
    if data.draw(st.booleans()):
        del payload[cut:]  # truncated
    elif payload:
        payload[min(cut, len(payload) - 1)] ^= data.draw(st.integers(1, 255))  # one byte changed
    outcomes = [_outcome(d, GOOD, bytes(payload), 0, 2**62) for d in _decoders(with_headers)]
    assert all(o == outcomes[0] for o in outcomes)


@pytest.mark.parametrize(
    ("payload", "what"),
    [
        (b"\x80", "its length runs past the records"),
        (b"\x00", "it is empty"),
        (b"\x02\x00\x80", "truncated timestamp delta"),
        (b"\x06\x00\x00\x00\x07\x00\x00", "truncated key"),
        (b"\x0a\x00\x00\x00\x01\x01\x01\x01\x00", "bad header count"),
        (b"\x0c\x00\x00\x00\x01\x01\x02\x01\x01\x00\x00", "truncated header name"),
        (b"\x0e\x00\x00\x00\x01\x01\x00\x00", "bytes left over after its fields"),
    ],
)
def test_malformed_records_raise_corrupt_record_error(payload: bytes, what: str) -> None:
    for decoder in _decoders(True):
        with pytest.raises(CorruptRecordError, match=f"record 0 of the batch is malformed: {what}"):
            decoder.add(payload, 0, 0, None, 0, 10)
        assert decoder.rows == 0


def test_offsets_and_timestamps_out_of_int64_are_corrupt_not_wrapped() -> None:
    payload = _raw_record(5, b"k", b"v", [])
    for decoder in _decoders(False):
        with pytest.raises(CorruptRecordError, match="offset is out of range"):
            decoder.add(payload, 2**63 - 3, 0, None, 0, 10)
        with pytest.raises(CorruptRecordError, match="timestamp is out of range"):
            decoder.add(payload, 0, 2**62, None, 0, 10)  # ms fits, µs does not
        with pytest.raises(CorruptRecordError, match="timestamp is out of range"):
            decoder.add(payload, 0, 0, 2**62, 0, 10)


def test_read_range_equals_the_row_wise_path_and_skips_control_batches(tmp_path: Path) -> None:
    batches = _build(
        [
            (
                [NewRecord(b"a%d" % i, b"k", (("id", b"m%d" % i),), 1000 + i) for i in range(30)],
                Compression.ZSTD,
                False,
                0,
            ),
            ([NewRecord(None, b"t")], Compression.NONE, False, 3),
            (
                [NewRecord(b"c%d" % i, None, (("tag", b"T"),), 2000 + i) for i in range(30)],
                Compression.GZIP,
                True,
                2,
            ),
        ]
    )
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic("t", 4, {"segment.bytes": "1500"})
        for data in batches:
            storage.log("t", 3).append(data, assign_offsets=False)
    for start, end in ((0, 1000), (115, 150)):
        got = list(read_range(str(tmp_path / "data"), OffsetRange("t", 3, start, end), RecordFilter(), True))
        table = pa.Table.from_batches(got)
        expected = _expected(batches, start, end, True)
        assert table.equals(pa.Table.from_batches([expected]))
        assert 133 not in table.column("offset").to_pylist()  # the transaction marker is no row


@requires_native
def test_the_compiled_decoder_is_what_runs_when_built() -> None:
    assert IMPLEMENTATION == "compiled"
    assert not isinstance(new_decoder(b"id", b"tag", False), PyDecoder)


@requires_native
def test_a_compiled_decoder_without_init_refuses_to_decode() -> None:
    assert NATIVE is not None
    decoder = NATIVE.Decoder.__new__(NATIVE.Decoder)
    with pytest.raises(RuntimeError, match="__init__"):
        decoder.add(GOOD, 0, 0, None, 0, 10)
