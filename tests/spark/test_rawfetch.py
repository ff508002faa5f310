"""Remote mode's raw-batch reads (:mod:`logtrove.spark.rawfetch`) from a live broker:
the rows of direct mode over the same data directory, committed ones as the brute force
over the markers says, whatever the fetch size (a batch bigger than it doubles it). No
Spark session: the executor side alone. Splitting an answer into whole batches is
tested where it lives (tests/records/test_split.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.spark.helpers import BASE_TS, make_topic
from tests.txn.committed_data import (  # noqa: F401  (module-scoped fixtures shared with the query tests)
    PARTITIONS,
    TOPIC,
    Written,
    brute_force,
    written,
)

from logtrove.records import Compression, NewRecord, build_batch
from logtrove.spark import remote
from logtrove.spark.direct import read_range
from logtrove.spark.filtering import columnar_exact
from logtrove.spark.options import RecordFilter
from logtrove.spark.ranges import OffsetRange
from logtrove.spark.rawfetch import fetch_batches, read_range_raw
from logtrove.storage import Storage
from logtrove.testing import BrokerProcess, free_port


def _table(batches: Iterator[Any]) -> Any:
    got = list(batches)
    return pa.Table.from_batches(got) if got else None


def _offsets(batches: Iterator[Any]) -> list[int]:
    table = _table(batches)
    return [] if table is None else table.column("offset").to_pylist()


@pytest.mark.parametrize("read_committed", [True, False])
def test_raw_reads_show_what_the_markers_say(written: Written, read_committed: bool) -> None:  # noqa: F811
    committed, everything, lsos = brute_force(written.data)
    rows = committed if read_committed else everything
    with Storage.open(written.data, read_only=True) as storage:
        ends = {p: storage.log(TOPIC, p).log_end_offset for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        end = lsos[p] if read_committed else ends[p]
        expected = [r[1] for r in rows if r[0] == p]
        for size in (1 << 20, 700):  # 700 bytes: many fetches, and batches bigger than that
            got = read_range_raw(
                written.broker.bootstrap, OffsetRange(TOPIC, p, 0, end), False, "id", "tag",
                read_committed=read_committed,
            )  # fmt: skip
            batches = fetch_batches(
                written.broker.bootstrap,
                OffsetRange(TOPIC, p, 0, end),
                read_committed=read_committed,
                partition_bytes=size,
            )
            assert _offsets(got) == expected, (p, read_committed)
            assert sum(h.record_count for h, _ in batches) >= len(expected)
        cut = OffsetRange(TOPIC, p, 7, end - 5)
        got = read_range_raw(written.broker.bootstrap, cut, False, "id", "tag", read_committed=read_committed)
        assert _offsets(got) == [o for o in expected if 7 <= o < end - 5]


@pytest.mark.parametrize("read_committed", [True, False])
def test_filtered_remote_reads_keep_what_the_markers_say(written: Written, read_committed: bool) -> None:  # noqa: F811
    committed, everything, lsos = brute_force(written.data)
    rows = committed if read_committed else everything
    with Storage.open(written.data, read_only=True) as storage:
        ends = {p: storage.log(TOPIC, p).log_end_offset for p in range(PARTITIONS)}
    for flt in (RecordFilter(contains=b"needle"), RecordFilter(key=b"k1", contains=b"needle")):
        found = 0
        for p in range(PARTITIONS):
            end = lsos[p] if read_committed else ends[p]
            rng = OffsetRange(TOPIC, p, 0, end)
            got = remote.read_range(written.broker.bootstrap, rng, flt, False, read_committed=read_committed)
            expected = [
                r[1] for r in rows if r[0] == p and (flt.key in (None, r[2])) and b"needle" in (r[3] or b"")
            ]
            assert _offsets(got) == expected, (p, flt, read_committed)
            found += len(expected)
        assert found > 0


@pytest.fixture
def compressed(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A topic of batches in every codec, with headers, null keys and values."""
    data = tmp_path / "data"
    make_topic(data, "mixed", [], configs={"segment.bytes": "30000", "retention.ms": "-1"})
    with Storage.open(data) as storage:
        log = storage.log("mixed", 0)
        for i, codec in enumerate([*Compression] * 3):
            records = [
                NewRecord(
                    None if j % 7 == 3 else b"value %d %d" % (i, j) * (j % 5),
                    None if j % 4 == 0 else b"k%d" % j,
                    (("id", b"m-%d-%d" % (i, j)), ("tag", b"\xffbad")) if j % 3 else (),
                    BASE_TS + i * 100 + j,
                )
                for j in range(40)
            ]
            log.append(build_batch(records, base_offset=log.log_end_offset, compression=codec))
    with BrokerProcess(data, free_port()) as proc:
        yield proc


@pytest.mark.parametrize("headers", [False, True])
def test_raw_reads_equal_direct_reads_in_every_codec(compressed: BrokerProcess, headers: bool) -> None:
    with Storage.open(compressed.data, read_only=True) as storage:
        end = storage.log("mixed", 0).log_end_offset
    for start, stop in ((0, end), (13, end - 29)):
        rng = OffsetRange("mixed", 0, start, stop)
        raw = _table(read_range_raw(compressed.bootstrap, rng, headers, "id", "tag"))
        direct = _table(read_range(str(compressed.data), rng, RecordFilter(), headers))
        assert raw is not None and raw.num_rows == stop - start
        assert raw.equals(direct)


FILTERS = [
    RecordFilter(key=b"k5"),
    RecordFilter(key=b""),
    RecordFilter(id="m-4-5"),
    RecordFilter(tag="\ufffdbad"),  # the tag column shows b"\xffbad" so; the bytes differ
    RecordFilter(contains=b"value 2"),
    RecordFilter(contains=b"\xffbad"),  # not UTF-8: not an Arrow substring pattern
    RecordFilter(key=b"k13", contains=b"3 13"),
    RecordFilter(id="m-5-1", tag="\ufffdbad"),
    RecordFilter(key=b"k2", tag="nope"),
]


@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize("flt", FILTERS, ids=repr)
def test_filtered_remote_reads_equal_direct_reads(
    compressed: BrokerProcess, flt: RecordFilter, headers: bool
) -> None:
    with Storage.open(compressed.data, read_only=True) as storage:
        end = storage.log("mixed", 0).log_end_offset
    for start, stop in ((0, end), (13, end - 29)):
        rng = OffsetRange("mixed", 0, start, stop)
        got = _table(remote.read_range(compressed.bootstrap, rng, flt, headers))
        direct = _table(read_range(str(compressed.data), rng, flt, headers))
        assert (got is None) == (direct is None), flt
        assert got is None or got.equals(direct), flt


def test_a_filter_text_holding_u_fffd_matches_only_those_bytes(compressed: BrokerProcess) -> None:
    with Storage.open(compressed.data, read_only=True) as storage:
        rng = OffsetRange("mixed", 0, 0, storage.log("mixed", 0).log_end_offset)
    everything = _table(remote.read_range(compressed.bootstrap, rng, RecordFilter(), False))
    assert "\ufffdbad" in everything.column("tag").to_pylist()  # the column shows it so...
    assert not columnar_exact(RecordFilter(tag="\ufffdbad"))
    assert _table(remote.read_range(compressed.bootstrap, rng, RecordFilter(tag="\ufffdbad"), False)) is None
    shown = _table(
        remote.read_range(compressed.bootstrap, rng, RecordFilter(tag="\ufffdbad", key=b"k1"), True)
    )
    assert shown is None  # ...but the header is b"\xffbad", not the filter's bytes


def test_fetches_smaller_than_a_batch_still_get_every_batch_whole(compressed: BrokerProcess) -> None:
    with Storage.open(compressed.data, read_only=True) as storage:
        log = storage.log("mixed", 0)
        stored = [batch for _, batch in log.batches(0)]
        rng = OffsetRange("mixed", 0, 0, log.log_end_offset)
    assert max(map(len, stored)) > 100
    assert [b for _, b in fetch_batches(compressed.bootstrap, rng, partition_bytes=100)] == stored
