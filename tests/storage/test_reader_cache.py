"""The readers' cache of derived files: each kind an LRU within its own budget."""

from __future__ import annotations

from logtrove.storage.derived.cache import Kind, ReaderCache


def test_a_kind_drops_its_least_recently_used_entries_past_its_budget() -> None:
    cache = ReaderCache()
    kind: Kind[str] = Kind("k", 3)
    for key in "abc":
        cache.put(kind, key, key.upper())
    assert cache.get(kind, "a") == "A"  # a is now the most recently used
    cache.put(kind, "d", "D")
    assert cache.get(kind, "b") is None
    assert [cache.get(kind, k) for k in "acd"] == ["A", "C", "D"]


def test_weights_count_against_the_budget_and_the_newest_entry_always_stays() -> None:
    cache = ReaderCache()
    kind: Kind[str] = Kind("k", 10)
    cache.put(kind, "small", "s", 4)
    cache.put(kind, "medium", "m", 6)
    cache.put(kind, "huge", "h", 50)
    assert cache.get(kind, "small") is None and cache.get(kind, "medium") is None
    assert cache.get(kind, "huge") == "h"


def test_replaces_keeps_the_cached_entry_when_it_says_no() -> None:
    cache = ReaderCache()
    kind: Kind[int] = Kind("k", 10)
    cache.put(kind, "x", 5)
    cache.put(kind, "x", 3, replaces=lambda current: current <= 3)
    assert cache.get(kind, "x") == 5
    cache.put(kind, "x", 7, replaces=lambda current: current <= 7)
    assert cache.get(kind, "x") == 7


def test_kinds_do_not_evict_each_other() -> None:
    cache = ReaderCache()
    one: Kind[str] = Kind("one", 1)
    other: Kind[str] = Kind("other", 1)
    cache.put(one, "key", "first")
    cache.put(other, "key", "second")
    cache.put(other, "key2", "third")
    assert cache.get(one, "key") == "first"
    assert cache.get(other, "key") is None and cache.get(other, "key2") == "third"
    cache.clear()
    assert cache.get(one, "key") is None
