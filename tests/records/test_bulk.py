"""Whole batches decoded by the columnar decoder into records
(:func:`~logtrove.records.bulk.batch_records`) give what the row-wise decoder
(:func:`~logtrove.records.iter_records`) gives: the same records for every codec, null
keys, values and header values, LogAppendTime and compacted batches, and the same error
for batches it refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from tests.records.helpers import codecs, patch_header, record_lists, with_payload

from logtrove.records import (
    Compression,
    CorruptRecordError,
    InvalidRecordCountError,
    NewRecord,
    build_batch,
    iter_records,
    read_header,
)
from logtrove.records.bulk import batch_records, records_of
from logtrove.records.columnar import new_decoder
from logtrove.records.varint import encode_varint


def _both(batch: bytes, pos: int = 0) -> tuple[list[object], list[object]]:
    header = read_header(batch, pos)
    return batch_records(batch, header, pos), list(iter_records(batch, pos, header))


@given(record_lists, codecs)
def test_batch_records_equal_iter_records(records: list[NewRecord], codec: Compression) -> None:
    bulk, rows = _both(build_batch(records, base_offset=1234, compression=codec))
    assert bulk == rows


@pytest.mark.parametrize("log_append_time", [False, True])
def test_timestamps_offsets_and_nulls_come_back_as_stored(log_append_time: bool) -> None:
    records = [
        NewRecord(
            None if i % 3 == 0 else b"v%d" % i,
            None if i % 2 else b"k",
            (("h", None), ("", b"")) * (i % 2),
            ts,
        )
        for i, ts in enumerate([5, -1, 2**40, 0])
    ]
    batch = build_batch(records, base_offset=2**40, log_append_time=log_append_time)
    bulk, rows = _both(b"junk" + batch, 4)
    assert bulk == rows
    assert [r.offset for r in bulk] == [2**40 + i for i in range(4)]
    assert bulk[1].key is None and bulk[0].value is None and bulk[1].headers == (("h", None), ("", b""))


def test_a_compacted_batch_keeps_its_offset_gaps() -> None:
    batch = build_batch([NewRecord(b"a"), NewRecord(b"b")], offset_deltas=[0, 7], last_offset_delta=7)
    bulk, rows = _both(batch)
    assert bulk == rows and [r.offset for r in bulk] == [0, 7]


def _record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


def test_a_header_name_that_is_not_utf8_is_refused_as_iter_records_refuses_it() -> None:
    body = (
        b"\x00\x00\x00" + b"\x01" + b"\x00" + b"\x02" + b"\x04\xffx" + b"\x02v"
    )  # key null, value "", 1 header
    batch = bytes(with_payload(build_batch([NewRecord(b"")]), _record(body)))
    header = read_header(batch)
    with pytest.raises(CorruptRecordError) as bulk:
        batch_records(batch, header)
    with pytest.raises(CorruptRecordError) as rows:
        list(iter_records(batch, 0, header))
    assert str(bulk.value) == str(rows.value)


def test_a_header_name_holding_u_fffd_is_kept() -> None:
    bulk, rows = _both(build_batch([NewRecord(b"v", headers=(("\ufffdname", b"x"),))]))
    assert bulk == rows and bulk[0].headers == (("\ufffdname", b"x"),)


def test_malformed_records_and_wrong_counts_raise_what_iter_records_raises() -> None:
    good = build_batch([NewRecord(b"one"), NewRecord(b"two")])
    cut = bytes(with_payload(good, _record(b"\x00\x00\x00\x02")))  # a record that ends inside its fields
    miscounted = bytes(patch_header(good, record_count=3, last_offset_delta=2))
    for batch, kind in ((cut, CorruptRecordError), (miscounted, InvalidRecordCountError)):
        header = read_header(batch)
        with pytest.raises(kind) as bulk:
            batch_records(batch, header)
        with pytest.raises(kind) as rows:
            list(iter_records(batch, 0, header))
        assert str(bulk.value) == str(rows.value)


def test_records_of_needs_the_headers_column() -> None:
    with pytest.raises(ValueError, match="with_headers"):
        records_of(new_decoder(b"id", b"tag", False).take())
