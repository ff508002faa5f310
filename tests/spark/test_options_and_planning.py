"""Option parsing, range planning and micro-batch caps, without Spark."""

from __future__ import annotations

import gc
import sys
import types
from pathlib import Path

import pytest
from tests.spark.helpers import BASE_TS, make_topic, record

from logtrove.spark.options import OptionError, ReadOptions
from logtrove.spark.ranges import DirectCatalog, OffsetRange, plan_batch, split_ranges
from logtrove.spark.source import cap_offsets, freeze_imported
from logtrove.storage import Storage


def test_options_follow_spark_kafka_names_case_insensitively() -> None:
    opts = ReadOptions.parse(
        {
            "path": "/d",
            "subscribe": "a, b",
            "STARTINGOFFSETS": '{"a": {"0": 5, "1": -2}}',
            "maxOffsetsPerTrigger": "10",
            "includeHeaders": "true",
            "key": "k1",
        }
    )
    assert opts.subscribe == ("a", "b")
    assert opts.starting_offsets == {"a": {0: 5, 1: -2}}
    assert (opts.max_offsets_per_trigger, opts.include_headers, opts.filter.key) == (10, True, b"k1")
    assert ReadOptions.parse({"path": "/d", "subscribe": "a"}, streaming=True).starting_offsets == "latest"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "a"}, "exactly one of path"),
        ({"path": "/d", "bootstrap": "h:1", "subscribe": "a"}, "exactly one of path"),
        ({"path": "/d"}, "exactly one of subscribe"),
        ({"path": "/d", "subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of subscribe"),
        ({"path": "/d", "subscribe": "a", "startingOffsets": "{bad"}, "not valid JSON"),
        ({"path": "/d", "subscribe": "a", "minPartitions": "0"}, "at least 1"),
        ({"path": "/d", "subscribePattern": "("}, "not a regular expression"),
    ],
)
def test_bad_options_are_refused_with_a_reason(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        ReadOptions.parse(options)


def test_planning_splits_at_segments_and_to_min_partitions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data, "t", (record(i) for i in range(400)), configs={"segment.bytes": "8000"})
    with Storage.open(data, read_only=True) as storage:
        catalog = DirectCatalog(storage)
        [whole] = plan_batch(ReadOptions.parse({"path": str(data), "subscribe": "t"}), catalog)
        assert whole == OffsetRange("t", 0, 0, 400)
        bases = [s.base_offset for s in storage.log("t", 0).segments]
        pieces = split_ranges([whole], catalog, None)
        assert [p.start for p in pieces] == bases and pieces[-1].end == 400
        many = split_ranges([whole], catalog, 3 * len(bases))
        assert len(many) == 3 * len(bases)
        assert sorted((p.start, p.end) for p in many)[0][0] == 0
        covered = sorted(o for p in many for o in range(p.start, p.end))
        assert covered == list(range(400))
        by_time = ReadOptions.parse(
            {
                "path": str(data),
                "subscribe": "t",
                "startingTimestamp": str(BASE_TS + 99_500),
                "endingTimestamp": "9" * 15,
            }
        )
        assert plan_batch(by_time, catalog) == [OffsetRange("t", 0, 100, 400)]


def test_micro_batch_cap_is_shared_by_backlog_and_exact() -> None:
    start = {"t": {"0": 0, "1": 100}}
    latest = {"t": {"0": 300, "1": 200}}
    capped = cap_offsets(start, latest, 40)
    assert capped["t"]["0"] - 0 + capped["t"]["1"] - 100 == 40
    assert capped["t"]["0"] - 0 > capped["t"]["1"] - 100
    assert cap_offsets(start, latest, 10_000) == latest


def in_collectors_sight(objects: list[list[int]]) -> list[bool]:
    """Whether each object is in one of the collector's generations (a frozen one is
    not). Asked per object, not by :func:`gc.get_freeze_count`: frozen objects that other
    threads free meanwhile lower that count."""
    seen = {id(o) for o in gc.get_objects()}
    return [id(o) in seen for o in objects]


def test_read_workers_freeze_what_each_batch_of_imports_brought_in() -> None:
    probe = "_logtrove_test_freeze_probe"
    try:
        before = [[-1]]  # alive at the first freeze
        freeze_imported()  # whatever earlier tests imported
        assert gc.get_freeze_count() > 0 and in_collectors_sight(before) == [False]
        long_lived = [[i] for i in range(1000)]  # objects alive when the next import lands
        assert freeze_imported() is False  # nothing imported since: no collection, no freeze
        assert all(in_collectors_sight(long_lived))
        sys.modules[probe] = types.ModuleType(probe)
        assert freeze_imported() is True
        assert not any(in_collectors_sight(long_lived))
        assert freeze_imported() is False
    finally:
        sys.modules.pop(probe, None)
        gc.unfreeze()


def test_the_spark_security_options_are_the_clients_settings() -> None:
    from logtrove.client.security import KNOWN
    from logtrove.spark.options import SECURITY_SETTINGS

    assert set(SECURITY_SETTINGS) == KNOWN
