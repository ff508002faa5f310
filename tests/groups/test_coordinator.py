"""The group coordinator and the offsets store, driven directly (no network)."""

from __future__ import annotations

import asyncio
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
from logtrove.groups import coordinator as gc
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
