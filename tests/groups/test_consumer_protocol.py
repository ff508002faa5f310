"""The consumer group protocol's state machine (KIP-848), driven directly: no network,
an injected clock, a real data directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from logtrove.groups import ConsumerGroups, Heartbeat, OffsetStore
from logtrove.groups.consumer_state import STATE_FILE, StateFileError
from logtrove.storage import Storage


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    with Storage.open(tmp_path / "data") as opened:
        yield opened


def groups_of(storage: Storage, clock: Clock, topics: dict[str, int]) -> ConsumerGroups:
    offsets = OffsetStore(storage)
    offsets.load()
    return ConsumerGroups(offsets, storage.path, lambda: topics, session_timeout_ms=10_000, clock=clock)


def join(member: str, topics: tuple[str, ...] = ("t",), instance_id: str | None = None) -> Heartbeat:
    return Heartbeat(
        "g", member, 0, instance_id, rebalance_timeout_ms=5000, subscribed_topic_names=topics, owned={}
    )


def beat(member: str, epoch: int, owned: dict[str, set[int]] | None = None) -> Heartbeat:
    return Heartbeat("g", member, epoch, owned=owned)


def test_a_topic_appearing_bumps_the_group_epoch_and_assigns_it(storage: Storage) -> None:
    topics = {"t": 2}
    groups = groups_of(storage, Clock(), topics)
    first = groups.heartbeat(join("m1", ("t", "later")))
    assert first.assignment == {"t": {0, 1}}
    topics["later"] = 1
    grown = groups.heartbeat(beat("m1", first.member_epoch, {"t": {0, 1}}))
    assert grown.member_epoch > first.member_epoch
    assert grown.assignment == {"t": {0, 1}, "later": {0}}


def test_a_member_that_does_not_revoke_in_time_is_removed(storage: Storage) -> None:
    clock = Clock()
    groups = groups_of(storage, clock, {"t": 4})
    a = groups.heartbeat(join("a"))
    groups.heartbeat(join("b"))
    told = groups.heartbeat(beat("a", a.member_epoch, {"t": {0, 1, 2, 3}}))
    assert told.assignment is not None and len(told.assignment["t"]) == 2  # revoke the rest
    clock.now += 3
    groups.heartbeat(beat("b", told.member_epoch))  # b keeps its session
    clock.now += 3  # past a's 5 s rebalance timeout, within its session
    assert groups.expire() == [("g", "a")]
    b = groups.heartbeat(beat("b", groups.groups["g"].members["b"].member_epoch, {}))
    assert b.assignment == {"t": {0, 1, 2, 3}}


def test_sessions_expire_and_a_rejoin_at_epoch_zero_starts_over(storage: Storage) -> None:
    clock = Clock()
    groups = groups_of(storage, clock, {"t": 2})
    a = groups.heartbeat(join("a"))
    clock.now += 11
    assert groups.expire() == [("g", "a")]
    assert groups.heartbeat(beat("a", a.member_epoch)).error == ErrorCode.unknown_member_id
    again = groups.heartbeat(join("a"))
    assert again.error == ErrorCode.none and again.assignment == {"t": {0, 1}}


def test_admin_apis_see_a_session_ended_before_the_writer_loop_notices(storage: Storage) -> None:
    """A member silent for its whole session is gone for DeleteGroups, OffsetDelete and
    ConsumerGroupDescribe at once, not at the loop's next pass (which the old code
    waited for: NON_EMPTY_GROUP), as Kafka's session timers fire at the deadline."""
    clock = Clock()
    groups = groups_of(storage, clock, {"t": 2})
    groups.heartbeat(join("a"))
    clock.now += 9.999
    assert groups.delete_group("g") == ErrorCode.non_empty_group
    clock.now += 0.001  # the session's deadline
    assert groups.delete_offsets("g", [("t", 0)]) == {("t", 0): ErrorCode.none}
    current = groups.current("g")
    assert current is not None and current.members == {} and current.state == "Empty"
    assert groups.delete_group("g") == ErrorCode.none


def test_the_previous_epoch_is_let_in_only_without_new_partitions(storage: Storage) -> None:
    groups = groups_of(storage, Clock(), {"t": 4})
    a = groups.heartbeat(join("a"))
    b = groups.heartbeat(join("b"))
    kept = groups.heartbeat(beat("a", a.member_epoch, {"t": {0, 1, 2, 3}})).assignment
    assert kept is not None
    moved = groups.heartbeat(beat("a", a.member_epoch, kept))
    assert moved.member_epoch > a.member_epoch
    lost = groups.heartbeat(beat("a", a.member_epoch, kept))  # the answer was lost
    assert (lost.error, lost.member_epoch, lost.assignment) == (ErrorCode.none, moved.member_epoch, None)
    greedy = groups.heartbeat(beat("a", a.member_epoch, {"t": {0, 1, 2, 3}}))
    assert greedy.error == ErrorCode.fenced_member_epoch
    assert b.member_epoch >= 1


def test_state_is_written_and_read_back(storage: Storage) -> None:
    clock = Clock()
    groups = groups_of(storage, clock, {"t": 3})
    a = groups.heartbeat(join("a", instance_id="box"))
    data = groups.snapshot()
    assert data is not None and groups.snapshot() is None  # nothing new since
    groups.save(data)
    reread = groups_of(storage, clock, {"t": 3})
    member = reread.groups["g"].members["a"]
    assert (member.member_epoch, member.assigned, member.instance_id) == (
        a.member_epoch,
        {"t": {0, 1, 2}},
        "box",
    )
    assert reread.groups["g"].state == "Stable"


def test_a_corrupt_state_file_is_refused(storage: Storage) -> None:
    (storage.path / STATE_FILE).write_text('{"version": 1, "groups": {"g": {"members": 3}}}')
    with pytest.raises(StateFileError):
        groups_of(storage, Clock(), {})


def test_a_member_revoking_at_a_restart_gets_its_rebalance_timeout_anew(storage: Storage) -> None:
    clock = Clock()
    groups = groups_of(storage, clock, {"t": 4})
    a = groups.heartbeat(join("a"))
    groups.heartbeat(join("b"))
    groups.heartbeat(beat("a", a.member_epoch, {"t": {0, 1, 2, 3}}))  # a is told to revoke two
    data = groups.snapshot()
    assert data is not None
    groups.save(data)
    clock.now += 1
    reread = groups_of(storage, clock, {"t": 4})
    assert reread.expire() == []
    clock.now += 6
    assert ("g", "a") in reread.expire()


def test_range_is_used_when_members_ask_for_it(storage: Storage) -> None:
    groups = groups_of(storage, Clock(), {"t": 4})
    a = groups.heartbeat(
        Heartbeat(
            "g",
            "a",
            0,
            rebalance_timeout_ms=5000,
            subscribed_topic_names=("t",),
            owned={},
            server_assignor="range",
        )
    )
    assert a.assignment == {"t": {0, 1, 2, 3}} and groups.groups["g"].assignor == "range"
    unknown = groups.heartbeat(
        Heartbeat(
            "g",
            "b",
            0,
            rebalance_timeout_ms=5000,
            subscribed_topic_names=("t",),
            owned={},
            server_assignor="x",
        )
    )
    assert unknown.error == ErrorCode.unsupported_assignor and "b" not in groups.groups["g"].members


def test_a_regex_counts_once_resolved_and_follows_new_topics(storage: Storage) -> None:
    topics = {"lit": 1, "rx-1": 1, "other": 1}
    groups = groups_of(storage, Clock(), topics)
    joined = groups.heartbeat(
        Heartbeat(
            "g",
            "m",
            0,
            rebalance_timeout_ms=5000,
            subscribed_topic_names=("lit",),
            subscribed_topic_regex="rx-.*",
            owned={},
        )
    )
    assert joined.assignment == {"lit": {0}}  # literal topics first, as Kafka
    groups.resolve_regexes()
    both = groups.heartbeat(beat("m", joined.member_epoch, {"lit": {0}}))
    assert both.assignment == {"lit": {0}, "rx-1": {0}}
    topics["rx-2"] = 1
    unchanged = groups.heartbeat(beat("m", both.member_epoch, {"lit": {0}, "rx-1": {0}}))
    assert unchanged.assignment is None  # a heartbeat does not match regexes...
    groups.resolve_regexes()  # ...the resolution after it does
    grown = groups.heartbeat(beat("m", both.member_epoch))
    assert grown.assignment == {"lit": {0}, "rx-1": {0}, "rx-2": {0}}


def test_a_regex_subscribed_to_again_is_resolved_anew(storage: Storage) -> None:
    groups = groups_of(storage, Clock(), {"lit": 1, "rx-1": 1})
    regex = Heartbeat(
        "g",
        "m",
        0,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=(),
        subscribed_topic_regex="rx-.*",
        owned={},
    )
    epoch = groups.heartbeat(regex).member_epoch
    groups.resolve_regexes()
    epoch = groups.heartbeat(beat("m", epoch, {})).member_epoch
    dropped = groups.heartbeat(
        Heartbeat("g", "m", epoch, subscribed_topic_names=("lit",), subscribed_topic_regex="")
    )
    assert dropped.assignment == {}  # rx-1 to revoke first
    assert groups.groups["g"].regex_topics == {}
    again = groups.heartbeat(
        Heartbeat("g", "m", dropped.member_epoch, subscribed_topic_regex="rx-.*", owned={})
    )
    assert again.assignment == {"lit": {0}}  # literal topics first, again
