"""The one lag formula (groups.lag.lag_of), which the data directory and the broker
clients both feed: what it asks of its reader and what it answers."""

from __future__ import annotations

from logtrove.groups.lag import TagMatches, lag_of
from logtrove.groups.subscriptions import TagSubscription
from logtrove.groups.tags import TagFilter

NOW = 1_000_000


def _no_record(position: int) -> int | None:
    raise AssertionError("the first record is asked for only when there is lag")


def test_caught_up_asks_no_reader_and_is_zero_not_none() -> None:
    row = lag_of("g", "t", 0, 0, 50, 50, now=NOW, first_timestamp=_no_record, count_tags=None)
    assert (row.lag, row.time_lag_ms, row.never_committed) == (0, 0, False)


def test_never_committed_is_none_everywhere() -> None:
    row = lag_of("g", "t", 0, 0, 50, None, now=NOW, first_timestamp=_no_record, count_tags=None)
    assert (row.lag, row.time_lag_ms, row.committed_offset, row.never_committed) == (None, None, None, True)


def test_time_lag_is_the_age_of_the_first_unconsumed_record() -> None:
    asked: list[int] = []

    def first(position: int) -> int | None:
        asked.append(position)
        return NOW - 7_000

    row = lag_of("g", "t", 0, 0, 50, 20, now=NOW, first_timestamp=first, count_tags=None)
    assert (row.lag, row.time_lag_ms, asked) == (30, 7_000, [20])


def test_tag_lag_counts_from_the_commit_and_is_unknown_without_a_counter() -> None:
    sub = TagSubscription("g", "t", "A || B", 0)
    ranges: list[tuple[str, int, int]] = []

    def count(tags: TagFilter, start: int, end: int) -> TagMatches | None:
        ranges.append((str(tags), start, end))
        return TagMatches(4, NOW - 3_000)

    def first(position: int) -> int | None:
        return NOW - 9_000

    counted = lag_of(
        "g", "t", 0, 0, 50, 20, now=NOW, first_timestamp=first, count_tags=count, subscription=sub
    )
    assert (counted.tag_lag, counted.tag_time_lag_ms, ranges) == (4, 3_000, [("A || B", 20, 50)])
    unknown = lag_of(
        "g", "t", 0, 0, 50, 20, now=NOW, first_timestamp=first, count_tags=None, subscription=sub
    )
    assert (unknown.lag, unknown.tag_lag, unknown.tag_time_lag_ms) == (30, None, None)
    every = TagSubscription("g", "t", "*", 0)
    all_tags = lag_of(
        "g", "t", 0, 0, 50, 20, now=NOW, first_timestamp=first, count_tags=None, subscription=every
    )
    assert (all_tags.tag_lag, all_tags.tag_time_lag_ms) == (30, 9_000)
