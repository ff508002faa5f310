"""The columnar encoder: the compiled one and its pure-Python twin give the same bytes and
the same errors, those bytes are ``build_batch``'s for the same rows, and the writer's
columnar path stores what the row-wise path stored (no Spark session needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.spark.helpers import make_topic

from logtrove.records import NewRecord, build_batch, iter_records, read_header
from logtrove.records import encoder as enc
from logtrove.records.builder import frame_records
from logtrove.records.partitioner import partition_for_key
from logtrove.spark.encoding import TopicRows, topic_rows
from logtrove.spark.writer import (
    BATCH_BYTES,
    rows_from_arrow,
    write_arrow_direct,
    write_arrow_remote,
    write_direct,
)

NOW_MS = 1_700_000_123_456
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

Row = tuple[bytes | None, bytes | None, int | None, list[tuple[str, bytes | None]] | None]


def _implementations() -> list[tuple[Any, Any]]:
    found: list[tuple[Any, Any]] = [(enc.py_partition_order, enc.py_encode_records)]
    if enc.IMPLEMENTATION == "compiled":
        from logtrove.records import _encoder

        found.append((_encoder.partition_order, _encoder.encode_records))
    return found


def _batch(rows: list[Row], *, pad: int = 0, with_headers: bool = True) -> Any:
    """An Arrow batch of ``rows`` (timestamps in ms, stored as µs), sliced past ``pad``
    leading rows so that every array has a non-zero offset."""
    filler: Row = (b"pad", b"pad", 0, [("p", b"p")])
    rows = [filler] * pad + rows
    arrays = [
        pa.array([r[0] for r in rows], pa.binary()),
        pa.array([r[1] for r in rows], pa.binary()),
        pa.array([None if r[2] is None else r[2] * 1000 for r in rows], pa.timestamp("us", tz="UTC")),
    ]
    names = ["key", "value", "timestamp"]
    if with_headers:
        arrays.append(
            pa.array(
                [None if r[3] is None else [{"key": k, "value": v} for k, v in r[3]] for r in rows],
                HEADER_TYPE,
            )
        )
        names.append("headers")
    return pa.RecordBatch.from_arrays(arrays, names).slice(pad)


def _new_record(row: Row) -> NewRecord:
    key, value, ts, headers = row
    return NewRecord(value, key, tuple(headers or ()), NOW_MS if ts is None else ts)


def _group(batch: Any) -> TopicRows:
    (group,) = topic_rows(batch, "t")
    return group


def _encode_all(encode: Any, group: TopicRows, order: bytes, budget: int) -> list[bytes]:
    """Every batch of the rows in ``order``, cut where the estimate reaches ``budget``."""
    out, lo, hi = [], 0, len(order) // 8
    while lo < hi:
        payload, end, base_ts, max_ts = encode(
            group.key, group.value, group.timestamp, group.headers, group.rows, order, lo, hi, budget, NOW_MS
        )
        assert lo < end <= hi
        out.append(frame_records(payload, end - lo, base_ts, max_ts))
        lo = end
    return out


def _old_chunks(records: list[NewRecord], budget: int) -> list[list[NewRecord]]:
    """The row-wise writer's chunking (``writer._chunks`` at another budget)."""
    chunks: list[list[NewRecord]] = [[]]
    size = 0
    for record in records:
        chunks[-1].append(record)
        size += len(record.value or b"") + len(record.key or b"") + 32
        if size >= budget:
            chunks.append([])
            size = 0
    return [c for c in chunks if c]


def _order(n: int) -> bytes:
    return b"".join(i.to_bytes(8, "little") for i in range(n))


blobs = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=200, max_size=3000))
header_lists = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.sampled_from(["id", "tag", "é", ""]), st.one_of(st.none(), st.binary(max_size=20))),
        max_size=4,
    ),
)
rows_strategy = st.lists(
    st.tuples(
        blobs,
        blobs,
        st.one_of(st.none(), st.integers(-(2**40), 2**44)),
        header_lists,
    ),
    min_size=1,
    max_size=60,
)


@given(rows=rows_strategy, pad=st.integers(0, 9), budget=st.sampled_from([1, 300, 5000, BATCH_BYTES]))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_encoded_batches_equal_build_batch_and_decode_back(rows: list[Row], pad: int, budget: int) -> None:
    group = _group(_batch(rows, pad=pad))
    records = [_new_record(r) for r in rows]
    expected = [build_batch(chunk) for chunk in _old_chunks(records, budget)]
    for _, encode in _implementations():
        assert _encode_all(encode, group, _order(len(rows)), budget) == expected
    decoded = [r for data in expected for r in iter_records(data, 0, read_header(data))]
    assert [(r.key, r.value, r.timestamp, r.headers) for r in decoded] == [
        (n.key, n.value, n.timestamp, n.headers) for n in records
    ]


def test_many_records_and_a_large_value_in_one_batch() -> None:
    rows: list[Row] = [(b"k%d" % i, b"v" * (i % 7), 1_700_000_000_000 + i, None) for i in range(20_000)]
    rows.append((None, bytes(range(256)) * 4096, None, [("id", b"x")]))  # 1 MiB
    group = _group(_batch(rows))
    (expected,) = [build_batch([_new_record(r) for r in rows])]
    for _, encode in _implementations():
        assert _encode_all(encode, group, _order(len(rows)), 2**62) == [expected]


@given(
    keys=st.lists(st.one_of(st.none(), st.binary(max_size=12)), min_size=1, max_size=80),
    explicit=st.one_of(
        st.none(), st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=80, max_size=80)
    ),
    total=st.integers(1, 7),
    rr_start=st.integers(0, 100),
)
@settings(max_examples=150, deadline=None)
def test_partition_order_is_kafkas_default_partitioner(
    keys: list[bytes | None], explicit: list[int | None] | None, total: int, rr_start: int
) -> None:
    n = len(keys)
    parts = None if explicit is None else [None if p is None else p % total for p in explicit[:n]]
    columns = [pa.array(keys, pa.binary()), pa.array(["v"] * n, pa.string())]
    names = ["key", "value"]
    if parts is not None:
        columns.append(pa.array(parts, pa.int32()))
        names.append("partition")
    group = _group(pa.RecordBatch.from_arrays(columns, names))
    rr, groups = rr_start, [[] for _ in range(total)]  # type: list[list[int]]
    for i, key in enumerate(keys):
        p = None if parts is None else parts[i]
        if p is None:
            if key is None:
                p, rr = rr % total, rr + 1
            else:
                p = partition_for_key(key, total)
        groups[p].append(i)
    starts = [0]
    for g in groups:
        starts.append(starts[-1] + len(g))
    expected = (_order(0) + b"".join(i.to_bytes(8, "little") for g in groups for i in g), starts, rr)
    for order_of, _ in _implementations():
        order, got_starts, got_rr = order_of(group.key, group.partition, group.rows, total, rr_start)
        assert (order, list(memoryview(got_starts).cast("q")), got_rr) == expected


@pytest.mark.parametrize(
    "impl", range(len(_implementations())), ids=["python", "compiled"][: len(_implementations())]
)
def test_bad_input_raises_the_same_value_error(impl: int) -> None:
    order_of, encode = _implementations()[impl]
    group = _group(
        pa.RecordBatch.from_arrays([pa.array([b"a"]), pa.array([7], pa.int32())], ["value", "partition"])
    )
    with pytest.raises(ValueError, match=r"^has partitions 0-2, not 7$"):
        order_of(group.key, group.partition, 1, 3, 0)
    group = _group(_batch([(None, b"v", None, [("id", b"x")])]))
    name = group.headers[4] if group.headers else None
    assert name is not None
    nameless = (*group.headers[:4], (b"\x00", name[1], name[2], name[3], name[4]), group.headers[5])  # type: ignore[index]
    with pytest.raises(ValueError, match=r"^row 0 has a header without a name$"):
        encode(group.key, group.value, group.timestamp, nameless, 1, _order(1), 0, 1, 1, NOW_MS)
    with pytest.raises(ValueError, match=r"^row index 5 is not in 0-0$"):
        encode(group.key, group.value, group.timestamp, None, 1, (5).to_bytes(8, "little"), 0, 1, 1, NOW_MS)
    short = (None, b"\x00" * 4, b"", False, 0)  # one row needs 8 bytes of offsets
    with pytest.raises(ValueError, match=r"offsets buffer holds 4 bytes, needs 8"):
        encode(None, short, None, None, 1, _order(1), 0, 1, 1, NOW_MS)
    outside = (None, (0).to_bytes(4, "little") + (9).to_bytes(4, "little"), b"abc", False, 0)
    with pytest.raises(ValueError, match=r"^row 0: its offsets are outside the data buffer$"):
        encode(None, outside, None, None, 1, _order(1), 0, 1, 1, NOW_MS)


def _records(data: Path, topic: str, partitions: int) -> list[list[tuple[Any, ...]]]:
    from tests.spark.helpers import stored

    by_partition: list[list[tuple[Any, ...]]] = [[] for _ in range(partitions)]
    for p, offset, value in stored(data, topic):
        by_partition[p].append((offset, value))
    return by_partition


def test_columnar_writer_stores_what_the_row_wise_writer_stored(tmp_path: Path) -> None:
    rows: list[Row] = [
        (
            None if i % 5 == 0 else b"k%d" % (i % 13),
            b"value %d" % i,
            1_700_000_000_000 + 1000 * i,
            [("id", b"m%d" % i)],
        )
        for i in range(3000)
    ]
    batches = [_batch(rows[i : i + 700]) for i in range(0, len(rows), 700)]
    old, new = tmp_path / "old", tmp_path / "new"
    for data in (old, new):
        make_topic(data, "sink", [], partitions=3)
    write_direct(str(old), [r for b in batches for r in rows_from_arrow(b, "sink")])
    assert write_arrow_direct(str(new), batches, "sink") == 3000
    assert _records(new, "sink", 3) == _records(old, "sink", 3)
    assert _segment_bytes(new) == _segment_bytes(old)


def _segment_bytes(data: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data)): p.read_bytes() for p in sorted(data.rglob("*.log"))}


def test_remote_writer_produces_the_batches_the_direct_writer_appends(tmp_path: Path) -> None:
    from logtrove.testing import BrokerProcess, free_port

    rows: list[Row] = [
        (
            None if i % 4 == 0 else b"k%d" % (i % 11),
            b"value %d" % i,
            1_700_000_000_000 + i,
            [("id", b"m%d" % i)],
        )
        for i in range(2000)
    ]
    batches = [_batch(rows[i : i + 500]) for i in range(0, len(rows), 500)]
    remote, direct = tmp_path / "remote", tmp_path / "direct"
    for data in (remote, direct):
        make_topic(data, "sink", [], partitions=3, configs={"retention.ms": "-1"})
    assert write_arrow_direct(str(direct), batches, "sink") == 2000
    with BrokerProcess(remote, free_port()) as proc:
        assert write_arrow_remote(proc.bootstrap, batches, "sink") == 2000
    assert _records(remote, "sink", 3) == _records(direct, "sink", 3)
    assert all(len(p) > 400 for p in _records(remote, "sink", 3))


def test_writer_refuses_bad_rows_before_writing(tmp_path: Path) -> None:
    from tests.spark.helpers import stored

    from logtrove.spark.options import OptionError

    data = tmp_path / "data"
    make_topic(data, "sink", [], partitions=3)
    bad = [
        (
            pa.RecordBatch.from_arrays([pa.array([1, 2])], ["value"]),
            "sink",
            "value column must be string or binary",
        ),
        (pa.RecordBatch.from_arrays([pa.array(["v"])], ["key"]), "sink", "needs a value column"),
        (
            pa.RecordBatch.from_arrays([pa.array(["v"]), pa.array([""])], ["value", "topic"]),
            None,
            "without a topic",
        ),
        (
            pa.RecordBatch.from_arrays([pa.array(["v"]), pa.array([7], pa.int32())], ["value", "partition"]),
            "sink",
            r"topic sink has partitions 0-2, not 7",
        ),
    ]
    for batch, topic, message in bad:
        with pytest.raises(OptionError, match=message):
            write_arrow_direct(str(data), [batch], topic)
    assert stored(data, "sink") == []
    # an empty topic cell falls back to the topic option, as in the row-wise writer
    batch = pa.RecordBatch.from_arrays([pa.array(["a", "b"]), pa.array(["", None])], ["value", "topic"])
    assert write_arrow_direct(str(data), [batch], "sink") == 2
    assert sorted(v for _, _, v in stored(data, "sink")) == [b"a", b"b"]


def test_large_binary_and_large_list_columns_encode_the_same() -> None:
    rows: list[Row] = [
        (
            None if i % 3 == 0 else b"k%d" % i,
            None if i % 7 == 0 else b"v" * i,
            1_700_000_000_000 + i,
            [("id", b"%d" % i)],
        )
        for i in range(50)
    ]
    batch = _batch(rows, pad=3)
    large = pa.RecordBatch.from_arrays(
        [
            batch.column(0).cast(pa.large_binary()),
            batch.column(1).cast(pa.large_string()),
            batch.column(2),
            batch.column(3).cast(
                pa.large_list(pa.struct([("key", pa.large_string()), ("value", pa.large_binary())]))
            ),
        ],
        batch.schema.names,
    )
    group = _group(large)
    assert group.key is not None and group.key[3] and group.headers is not None and group.headers[2]
    expected = [build_batch([_new_record(r) for r in rows])]
    for _, encode in _implementations():
        assert _encode_all(encode, group, _order(len(rows)), 2**62) == expected
