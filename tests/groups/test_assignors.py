"""The server-side assignors: balance, stickiness, eligibility and determinism."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logtrove.groups.assignors import (
    InvalidRegexError,
    range_,
    resolve_subscription,
    uniform,
)


def counts(assignment: dict[str, dict[str, set[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in topics.values()) for m, topics in assignment.items()}


def every_partition_once(assignment: dict[str, dict[str, set[int]]], partitions: dict[str, int]) -> bool:
    seen = [(t, p) for topics in assignment.values() for t, ps in topics.items() for p in ps]
    return sorted(seen) == sorted((t, p) for t, n in partitions.items() for p in range(n))


def test_uniform_balances_a_homogeneous_group() -> None:
    members = {m: frozenset({"a", "b"}) for m in ("m1", "m2", "m3")}
    result = uniform(members, {"a": 4, "b": 3}, {})
    assert every_partition_once(result, {"a": 4, "b": 3})
    assert sorted(counts(result).values()) == [2, 2, 3]


def test_uniform_keeps_what_members_hold_when_balanced() -> None:
    members = {"m1": frozenset({"a"}), "m2": frozenset({"a"})}
    current = {"m1": {"a": {1, 3}}, "m2": {"a": {0, 2}}}
    assert uniform(members, {"a": 4}, current) == {"m1": {"a": {1, 3}}, "m2": {"a": {0, 2}}}


def test_uniform_new_member_takes_only_its_share_from_others() -> None:
    members = {m: frozenset({"a"}) for m in ("m1", "m2", "m3")}
    current = {"m1": {"a": {0, 1, 2}}, "m2": {"a": {3, 4, 5}}}
    result = uniform(members, {"a": 6}, current)
    assert counts(result) == {"m1": 2, "m2": 2, "m3": 2}
    assert result["m1"]["a"] <= {0, 1, 2} and result["m2"]["a"] <= {3, 4, 5}


def test_uniform_departed_members_partitions_are_spread() -> None:
    members = {m: frozenset({"a"}) for m in ("m1", "m2")}
    current = {"m1": {"a": {0, 1}}, "m2": {"a": {2, 3}}, "gone": {"a": {4, 5}}}
    result = uniform(members, {"a": 6}, current)
    assert counts(result) == {"m1": 3, "m2": 3}
    assert {0, 1} <= result["m1"]["a"] and {2, 3} <= result["m2"]["a"]


def test_uniform_gives_partitions_only_to_subscribers() -> None:
    members = {"m1": frozenset({"a"}), "m2": frozenset({"a", "b"})}
    result = uniform(members, {"a": 2, "b": 4}, {})
    assert every_partition_once(result, {"a": 2, "b": 4})
    assert "b" not in result["m1"]
    assert counts(result) == {"m1": 2, "m2": 4}


def test_uniform_drops_partitions_of_unsubscribed_or_shrunk_topics() -> None:
    members = {"m1": frozenset({"a"})}
    current = {"m1": {"a": {0, 7}, "b": {0}}}
    assert uniform(members, {"a": 2}, current) == {"m1": {"a": {0, 1}}}


def test_uniform_is_deterministic() -> None:
    members = {f"m{i}": frozenset({"a", "b", "c"}) for i in range(5)}
    parts = {"a": 7, "b": 5, "c": 11}
    assert uniform(members, parts, {}) == uniform(dict(reversed(list(members.items()))), parts, {})


def test_uniform_member_with_nothing_to_take_gets_an_empty_entry() -> None:
    assert uniform({"m1": frozenset({"a"}), "m2": frozenset({"a"})}, {"a": 1}, {}) == {
        "m1": {"a": {0}},
        "m2": {},
    }


def test_range_gives_contiguous_runs_in_member_order() -> None:
    members = {m: frozenset({"a", "b"}) for m in ("m2", "m1")}
    result = range_(members, {"a": 5, "b": 5}, {})
    assert result == {"m1": {"a": {0, 1, 2}, "b": {0, 1, 2}}, "m2": {"a": {3, 4}, "b": {3, 4}}}


def test_range_splits_each_topic_among_its_own_subscribers() -> None:
    members = {"m1": frozenset({"a"}), "m2": frozenset({"a", "b"})}
    assert range_(members, {"a": 2, "b": 2}, {}) == {"m1": {"a": {0}}, "m2": {"a": {1}, "b": {0, 1}}}


def test_resolve_subscription_matches_whole_names_and_skips_internal_topics() -> None:
    topics = {"orders": 1, "orders-eu": 1, "xorders": 1, "__consumer_offsets": 1}
    assert resolve_subscription(frozenset({"missing"}), "orders.*", topics) == {"orders", "orders-eu"}
    assert resolve_subscription(frozenset(), ".*", topics) == {"orders", "orders-eu", "xorders"}


def test_resolve_subscription_refuses_a_bad_regex() -> None:
    with pytest.raises(InvalidRegexError, match="missing"):
        resolve_subscription(frozenset(), "(unclosed", {"a": 1})


def test_a_backtracking_bomb_regex_matches_in_linear_time() -> None:
    topics = {"a" * 200 + "!": 1, "aaa": 1}  # (a+)+$ takes 2^200 steps in a backtracking engine
    assert resolve_subscription(frozenset(), "(a+)+", topics) == {"aaa"}


@given(
    members=st.integers(1, 12),
    partitions=st.lists(st.integers(0, 20), min_size=1, max_size=4),
    seed=st.randoms(use_true_random=False),
)
@settings(max_examples=300, deadline=None)
def test_uniform_balances_any_homogeneous_group_from_any_start(
    members: int, partitions: list[int], seed: random.Random
) -> None:
    names = [f"m{i}" for i in range(members)]
    topics = {f"t{i}": n for i, n in enumerate(partitions)}
    subs = {m: frozenset(topics) for m in names}
    current: dict[str, dict[str, set[int]]] = {}
    for t, n in topics.items():  # a random earlier assignment, members that left included
        for p in range(n + 2):
            owner = seed.choice([*names, "gone"])
            current.setdefault(owner, {}).setdefault(t, set()).add(p)
    result = uniform(subs, topics, current)
    assert every_partition_once(result, topics)
    sizes = counts(result).values()
    assert max(sizes) - min(sizes) <= 1
    kept = sum(len(result[m].get(t, set()) & current.get(m, {}).get(t, set())) for m in names for t in topics)
    quota = -(-sum(topics.values()) // members)  # no member keeps more than the ceiling
    held = {m: sum(len(ps & set(range(topics[t]))) for t, ps in current.get(m, {}).items()) for m in names}
    assert kept >= sum(min(h, quota - 1) for h in held.values())  # sticky up to the floor share
