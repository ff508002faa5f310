"""The group coordinator and the offsets store, driven directly (no network)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from logtrove.groups import (
    OFFSETS_TOPIC,
    CommitKey,
    CommittedOffset,
    GroupCoordinator,
    OffsetRecordError,
    OffsetStore,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from logtrove.groups import classic_state as gc
from logtrove.storage import Storage


def test_offset_key_and_value_round_trip_in_kafka_layout() -> None:
    key = CommitKey("g", "orders", 3)
    raw = encode_key(key)
    assert raw == b"\x00\x01" + b"\x00\x01g" + b"\x00\x06orders" + b"\x00\x00\x00\x03"
    assert decode_key(raw) == key
    value = CommittedOffset(42, -1, "meta", 1_700_000_000_000)
    assert decode_value(encode_value(value)) == value
    with pytest.raises(OffsetRecordError):
        decode_key(b"\x00\x02\x00\x01g")  # version 2 = group metadata, not a commit


def test_commits_survive_reopening_and_tombstones_forget(tmp_path: Path) -> None:
    with Storage.open(tmp_path) as storage:
        store = OffsetStore(storage)
        store.load()
        assert storage.topic(OFFSETS_TOPIC).config.compact
        store.commit("g", {("t", 0): CommittedOffset(5, -1, "", 1), ("t", 1): CommittedOffset(7, -1, "x", 1)})
        store.commit("g", {("t", 0): CommittedOffset(9, -1, "", 2)})
        store.delete([CommitKey("g", "t", 1)])
    with Storage.open(tmp_path) as storage:
        store = OffsetStore(storage)
        assert store.load() == 1
        assert store.get("g", "t", 0) == CommittedOffset(9, -1, "", 2)
        assert store.get("g", "t", 1) is None
        assert store.groups() == {"g"}


def _join(coord: GroupCoordinator, member_id: str, session_ms: int = 1000) -> asyncio.Task[dict[str, object]]:
    return asyncio.ensure_future(
        coord.join(
            "g",
            member_id,
            client_id="c",
            client_host="h",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=2000,
            protocol_type="consumer",
            protocols=[("range", b"meta-" + member_id.encode())],
        )
    )


async def _two_member_group(coord: GroupCoordinator) -> tuple[str, str]:
    ids = []
    for _ in range(2):
        first = await _join(coord, "")
        assert first["error_code"] == gc.MEMBER_ID_REQUIRED
        ids.append(str(first["member_id"]))
    a, b = await asyncio.gather(_join(coord, ids[0]), _join(coord, ids[1]))
    assert a["generation_id"] == b["generation_id"] == 1
    assert a["leader"] == ids[0]
    assert len(a["members"]) == 2 and b["members"] == []  # type: ignore[arg-type]
    return ids[0], ids[1]


def test_join_sync_heartbeat_and_session_timeout(tmp_path: Path) -> None:
    async def scenario() -> None:
        with Storage.open(tmp_path) as storage:
            store = OffsetStore(storage)
            store.load()
            coord = GroupCoordinator(store, initial_rebalance_delay_ms=50)
            leader, follower = await _two_member_group(coord)
            follower_sync = asyncio.ensure_future(coord.sync("g", follower, 1, {}))
            await asyncio.sleep(0)
            leader_sync = await coord.sync("g", leader, 1, {leader: b"A", follower: b"B"})
            assert leader_sync["assignment"] == b"A"
            assert (await follower_sync)["assignment"] == b"B"
            assert coord.heartbeat("g", leader, 1) == gc.NONE
            assert coord.heartbeat("g", leader, 0) == gc.ILLEGAL_GENERATION
            assert coord.heartbeat("g", "stranger", 1) == gc.UNKNOWN_MEMBER_ID
            assert coord.commit_offsets("g", leader, 1, {("t", 0): CommittedOffset(3, -1, "", 0)}) == gc.NONE
            assert coord.commit_offsets("g", leader, 7, {}) == gc.ILLEGAL_GENERATION

            # the follower goes silent: after its session timeout it is removed, the
            # leader learns of the rebalance by heartbeat and rejoins alone
            await asyncio.sleep(0.6)
            assert coord.heartbeat("g", leader, 1) == gc.NONE
            await asyncio.sleep(0.6)
            coord.expire_sessions()
            assert coord.heartbeat("g", leader, 1) == gc.REBALANCE_IN_PROGRESS
            rejoined = await _join(coord, leader)
            assert rejoined["generation_id"] == 2
            assert [m["member_id"] for m in rejoined["members"]] == [leader]  # type: ignore[attr-defined,union-attr]
            assert coord.leave("g", leader) == gc.NONE
            assert coord.describe("g")["group_state"] == gc.EMPTY
            await coord.stop()

    asyncio.run(scenario())


def _static_join(
    coord: GroupCoordinator, member_id: str, instance: str, protocols: list[tuple[str, bytes]] | None = None
) -> asyncio.Task[dict[str, object]]:
    return asyncio.ensure_future(
        coord.join(
            "g",
            member_id,
            client_id="c",
            client_host="h",
            session_timeout_ms=1000,
            rebalance_timeout_ms=300,
            protocol_type="consumer",
            protocols=protocols or [("range", b"meta-" + instance.encode())],
            group_instance_id=instance,
        )
    )


BOTH = [("range", b"r"), ("roundrobin", b"rr")]


async def _stable_static_group(coord: GroupCoordinator) -> tuple[str, str]:
    """Two static members (range preferred, roundrobin possible), synced: returns
    (leader ID, follower ID)."""
    a, b = await asyncio.gather(
        _static_join(coord, "", "inst-a", BOTH), _static_join(coord, "", "inst-b", BOTH)
    )
    assert a["error_code"] == b["error_code"] == gc.NONE  # no MEMBER_ID_REQUIRED for static members
    leader, follower = str(a["member_id"]), str(b["member_id"])
    assert a["leader"] == leader and a["generation_id"] == 1
    follower_sync = asyncio.ensure_future(coord.sync("g", follower, 1, {}, group_instance_id="inst-b"))
    await asyncio.sleep(0)
    await coord.sync("g", leader, 1, {leader: b"A", follower: b"B"}, group_instance_id="inst-a")
    assert (await follower_sync)["assignment"] == b"B"
    return leader, follower


async def _sync_both(coord: GroupCoordinator, leader: str, follower: str) -> None:
    """Generation 1's SyncGroups: the leader assigns b"A" to itself, b"B" to the follower."""
    follower_sync = asyncio.ensure_future(coord.sync("g", follower, 1, {}))
    await asyncio.sleep(0)
    await coord.sync("g", leader, 1, {leader: b"A", follower: b"B"})
    assert (await follower_sync)["assignment"] == b"B"


class SteppedClock:
    """:func:`time.monotonic` plus an offset the test moves forward, so a session
    timeout passes without sleeping through it (rebalance timers still run in real time)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def _open_coordinator(
    tmp_path: Path, monotonic: Callable[[], float] = time.monotonic
) -> tuple[Storage, GroupCoordinator]:
    storage = Storage.open(tmp_path)
    store = OffsetStore(storage)
    store.load()
    return storage, GroupCoordinator(store, initial_rebalance_delay_ms=50, monotonic=monotonic)


def test_restarted_static_member_replaces_the_old_one_without_a_rebalance(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage, coord = _open_coordinator(tmp_path)
        with storage:
            leader, follower = await _stable_static_group(coord)
            # inst-a (the leader) restarts: a new member ID, the same generation at once,
            # the old leader named so the new process does not recompute an assignment
            rejoined = await _static_join(coord, "", "inst-a", [("range", b"changed"), ("roundrobin", b"")])
            new_id = str(rejoined["member_id"])
            assert rejoined["error_code"] == gc.NONE and new_id != leader
            assert rejoined["generation_id"] == 1 and rejoined["leader"] == leader
            assert (await coord.sync("g", new_id, 1, {}, group_instance_id="inst-a"))["assignment"] == b"A"
            assert coord.describe("g")["group_state"] == gc.STABLE
            assert coord.heartbeat("g", follower, 1, "inst-b") == gc.NONE  # no rebalance for the other one

            # the old process is fenced everywhere; a stranger instance is unknown
            commit = {("t", 0): CommittedOffset(1, -1, "", 0)}
            assert coord.heartbeat("g", leader, 1, "inst-a") == gc.FENCED_INSTANCE_ID
            assert (await coord.sync("g", leader, 1, {}, group_instance_id="inst-a"))[
                "error_code"
            ] == gc.FENCED_INSTANCE_ID
            assert coord.commit_offsets("g", leader, 1, commit, "inst-a") == gc.FENCED_INSTANCE_ID
            assert (await _static_join(coord, leader, "inst-a"))["error_code"] == gc.FENCED_INSTANCE_ID
            assert coord.leave("g", leader, "inst-a") == gc.FENCED_INSTANCE_ID
            assert coord.heartbeat("g", new_id, 1, "inst-zzz") == gc.UNKNOWN_MEMBER_ID
            assert coord.commit_offsets("g", new_id, 1, commit, "inst-a") == gc.NONE

            # a restart that changes the group's protocol (the leader now prefers
            # roundrobin): a rebalance after all
            again = _static_join(coord, "", "inst-a", [("roundrobin", b""), ("range", b"")])
            await asyncio.sleep(0.05)
            assert coord.describe("g")["group_state"] == gc.PREPARING
            assert coord.heartbeat("g", follower, 1, "inst-b") == gc.REBALANCE_IN_PROGRESS
            await coord.stop()
            again.cancel()

    asyncio.run(scenario())


def test_absent_static_member_keeps_its_place_until_its_session_ends(tmp_path: Path) -> None:
    clock = SteppedClock()

    async def scenario() -> None:
        storage, coord = _open_coordinator(tmp_path, clock)
        with storage:
            leader, follower = await _stable_static_group(coord)
            # a third member joins; inst-b never rejoins, yet stays in the next generation
            third = await asyncio.gather(_join(coord, ""))
            newcomer = str(third[0]["member_id"])
            rejoin_leader = _static_join(coord, leader, "inst-a")
            joined = await asyncio.gather(rejoin_leader, _join(coord, newcomer))
            assert joined[0]["generation_id"] == 2
            members = [m["member_id"] for m in joined[0]["members"]]  # type: ignore[attr-defined,union-attr]
            assert sorted(members) == sorted([leader, follower, newcomer])

            # its session ends: removed, and the group rebalances without it
            clock.advance(1.2)  # past the 1000 ms session
            coord.expire_sessions()
            assert follower not in coord.groups["g"].members
            assert "inst-b" not in coord.groups["g"].static
            await coord.stop()

    asyncio.run(scenario())


def test_closed_static_members_are_gone_at_their_session_deadline(tmp_path: Path) -> None:
    """Static members send no LeaveGroup on close; librdkafka's 0081 closes them, waits
    the session timeout (plus a millisecond or two) and deletes the group, which works
    on Kafka because its heartbeat timers fire at the deadline. The reaper used to poll
    every 0.25 s, so the group was still NON_EMPTY_GROUP."""

    async def scenario() -> None:
        storage, coord = _open_coordinator(tmp_path)
        with storage:
            await _stable_static_group(coord)  # 1000 ms sessions, then both go silent
            await asyncio.sleep(1.0)
            # no reaper runs here: DeleteGroups itself sees the sessions have ended
            assert coord.describe("g")["group_state"] == gc.EMPTY
            assert coord.delete_group("g") == gc.NONE

            coord.start()
            await _stable_static_group(coord)
            # the reaper's timer is due before this test's, so the members are gone
            # right after the deadline, not at the reaper's next poll
            await asyncio.sleep(1.0 + gc.DEADLINE_SLACK_S)
            assert coord.groups["g"].members == {}
            assert coord.groups["g"].state == gc.EMPTY
            await coord.stop()

    asyncio.run(scenario())


def test_leave_group_by_instance_id_alone(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage, coord = _open_coordinator(tmp_path)
        with storage:
            _leader, follower = await _stable_static_group(coord)
            assert coord.leave("g", "", "inst-nobody") == gc.UNKNOWN_MEMBER_ID
            assert coord.leave("g", "", "inst-b") == gc.NONE
            assert follower not in coord.groups["g"].members
            assert coord.describe("g")["group_state"] == gc.PREPARING
            await coord.stop()

    asyncio.run(scenario())


def test_offset_commit_accepted_while_preparing_refused_while_completing(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage, coord = _open_coordinator(tmp_path)
        with storage:
            commit = {("t", 0): CommittedOffset(3, -1, "", 0)}
            leader, follower = await _two_member_group(coord)
            assert coord.commit_offsets("g", leader, 1, commit) == gc.REBALANCE_IN_PROGRESS  # Completing
            await _sync_both(coord, leader, follower)
            assert coord.leave("g", follower) == gc.NONE  # PreparingRebalance, generation 1 current
            assert coord.describe("g")["group_state"] == gc.PREPARING
            assert coord.commit_offsets("g", leader, 1, commit) == gc.NONE
            assert coord.committed("g", "t", 0) == commit[("t", 0)]
            assert coord.commit_offsets("g", leader, 2, commit) == gc.ILLEGAL_GENERATION
            assert coord.commit_offsets("g", follower, 1, commit) == gc.UNKNOWN_MEMBER_ID
            assert coord.commit_offsets("g", "", -1, commit) == gc.UNKNOWN_MEMBER_ID
            await coord.stop()

    asyncio.run(scenario())


def test_follower_rejoining_unchanged_gets_the_current_generation_leader_rebalances(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage, coord = _open_coordinator(tmp_path)
        with storage:
            leader, follower = await _two_member_group(coord)
            await _sync_both(coord, leader, follower)
            again = await _join(coord, follower)  # same metadata, Stable: no rebalance
            assert again["generation_id"] == 1 and again["leader"] == leader and again["members"] == []
            assert coord.describe("g")["group_state"] == gc.STABLE
            assert (await coord.sync("g", follower, 1, {}))["assignment"] == b"B"
            rejoin = _join(coord, leader)  # the leader's JoinGroup always rebalances
            await asyncio.sleep(0.01)
            assert coord.describe("g")["group_state"] == gc.PREPARING
            rejoin.cancel()
            await coord.stop()

    asyncio.run(scenario())
