"""The transaction coordinator over a real data directory (no network): epochs and
fencing, markers and the partition state they leave, offsets applied only on commit, the
state file surviving a restart, and the completion of what a crash left."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from logtrove.groups import CommittedOffset, OffsetStore
from logtrove.records import NewRecord, build_batch, read_header
from logtrove.storage import Storage
from logtrove.testing import FakeClock
from logtrove.txn import (
    AbortedTxn,
    MarkerType,
    PartitionTxns,
    StateFileError,
    TransactionCoordinator,
    TxnIndexes,
    TxnState,
    marker_batch,
    marker_type,
)
from logtrove.txn.state import TransactionMetadata, TxnStateFile

TOPIC = "orders"


class _Ids:
    def __init__(self) -> None:
        self.n = 1000

    def __call__(self) -> int:
        self.n += 1
        return self.n


def _coordinator(storage: Storage, clock: FakeClock, ids: _Ids | None = None) -> TransactionCoordinator:
    offsets = OffsetStore(storage)
    offsets.load()
    coord = TransactionCoordinator(
        storage, offsets, TxnIndexes(), ids or _Ids(), clock=clock, max_timeout_ms=60_000
    )
    coord.load()
    return coord


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    with Storage.open(tmp_path / "data") as opened:
        opened.create_topic(TOPIC, 2)
        yield opened


def _produce(
    coord: TransactionCoordinator, storage: Storage, pid: int, epoch: int, partition: int, value: bytes
) -> int:
    """A transactional batch appended as the broker's produce path does; its offset."""
    assert coord.check_produce(pid, epoch, TOPIC, partition) == ErrorCode.none
    log = storage.log(TOPIC, partition)
    txns = coord.indexes.get(log)
    batch = build_batch(
        [NewRecord(value)], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
    )
    base = log.append(batch).base_offset
    txns.on_transactional_batch(pid, base)
    return base


def _commit(coord: TransactionCoordinator, tid: str, pid: int, epoch: int) -> ErrorCode:
    """EndTxn(commit) as the broker's handler runs it: decide, write the state, complete."""
    code = coord.end_txn(tid, pid, epoch, True)
    coord.save_now()
    if code == ErrorCode.none:
        coord.complete_commit(tid, decided=True)
    return code


def _markers(storage: Storage, partition: int) -> list[tuple[int, MarkerType | None]]:
    out = []
    for header, data in storage.log(TOPIC, partition).batches():
        if header.is_control:
            out.append((header.base_offset, marker_type(data, header)))
    return out


def test_marker_batch_is_kafkas_end_transaction_marker() -> None:
    batch = marker_batch(7, 3, False, coordinator_epoch=0, now_ms=1_700_000_000_000)
    header = read_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.record_count) == (
        7,
        3,
        -1,
        1,
    )
    assert marker_type(batch, header) is MarkerType.ABORT
    commit = marker_batch(7, 3, True, coordinator_epoch=0, now_ms=1)
    assert marker_type(commit, read_header(commit)) is MarkerType.COMMIT


def test_partition_state_gives_the_last_stable_offset_and_aborted_ranges() -> None:
    txns = PartitionTxns()
    txns.on_transactional_batch(1, 10)
    txns.on_transactional_batch(2, 12)
    txns.on_transactional_batch(1, 14)  # not its first batch: the open range starts at 10
    assert txns.last_stable_offset(20) == 10
    txns.on_marker(1, MarkerType.ABORT, 15)
    assert txns.last_stable_offset(20) == 12
    txns.on_marker(2, MarkerType.COMMIT, 16)
    txns.on_marker(2, MarkerType.ABORT, 17)  # nothing open for 2: a marker written twice
    assert txns.last_stable_offset(20) == 20
    assert txns.aborted == [AbortedTxn(1, 10, 15, 12)]  # 12: producer 2 still open then
    assert txns.aborted_between(0, 11) == [AbortedTxn(1, 10, 15, 12)]
    assert txns.aborted_between(16, 20) == []
    assert txns.aborted_between(0, 10) == []
    txns.forget_before(16)
    assert txns.aborted == []


def test_every_init_bumps_the_epoch_and_fences_the_older_producer(storage: Storage) -> None:
    coord = _coordinator(storage, FakeClock(1_000))
    code, pid, epoch = coord.init_producer_id("tx", 10_000)
    assert (code, epoch) == (ErrorCode.none, 0)
    assert coord.add_partitions("tx", pid, 0, [(TOPIC, 0)]) == ErrorCode.none
    _produce(coord, storage, pid, 0, 0, b"zombie")
    code, pid2, epoch2 = coord.init_producer_id("tx", 10_000)
    assert (code, pid2) == (ErrorCode.none, pid) and epoch2 == 2  # abort at epoch 1, then 2
    assert _markers(storage, 0) == [(1, MarkerType.ABORT)]
    assert coord.add_partitions("tx", pid, 0, [(TOPIC, 1)]) == ErrorCode.producer_fenced
    assert coord.end_txn("tx", pid, 0, True) == ErrorCode.producer_fenced
    assert coord.check_produce(pid, 0, TOPIC, 0) == ErrorCode.invalid_producer_epoch
    assert coord.add_partitions("tx", pid + 1, 2, [(TOPIC, 1)]) == ErrorCode.invalid_producer_id_mapping
    assert coord.init_producer_id("tx", 10_000, pid, 1)[0] == ErrorCode.producer_fenced  # KIP-360 form
    assert coord.init_producer_id("tx", 60_001)[0] == ErrorCode.invalid_transaction_timeout


def test_produce_needs_an_open_transaction_holding_the_partition(storage: Storage) -> None:
    coord = _coordinator(storage, FakeClock(1_000))
    _, pid, epoch = coord.init_producer_id("tx", 10_000)
    assert coord.check_produce(pid, epoch, TOPIC, 0) == ErrorCode.invalid_txn_state
    coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
    assert coord.check_produce(pid, epoch, TOPIC, 1) == ErrorCode.invalid_txn_state
    assert coord.check_produce(pid, epoch, TOPIC, 0) == ErrorCode.none
    assert coord.check_produce(pid + 99, 0, TOPIC, 0) == ErrorCode.invalid_txn_state


def test_commit_writes_markers_everywhere_and_applies_offsets_then(storage: Storage) -> None:
    coord = _coordinator(storage, FakeClock(1_000))
    _, pid, epoch = coord.init_producer_id("tx", 10_000)
    coord.add_partitions("tx", pid, epoch, [(TOPIC, 0), (TOPIC, 1)])
    _produce(coord, storage, pid, epoch, 0, b"a")
    assert coord.commit_offsets("tx", pid, epoch, "g", {(TOPIC, 0): CommittedOffset(5, -1, "", 0)}) == (
        ErrorCode.invalid_txn_state  # the group was not added (AddOffsetsToTxn)
    )
    assert coord.add_offsets("tx", pid, epoch, "g") == ErrorCode.none
    assert (
        coord.commit_offsets("tx", pid, epoch, "g", {(TOPIC, 0): CommittedOffset(5, -1, "m", 0)})
        == ErrorCode.none
    )
    assert coord.has_pending_offsets("g", TOPIC, 0)
    assert coord.offsets.get("g", TOPIC, 0) is None
    assert coord.end_txn("tx", pid, epoch, True) == ErrorCode.none
    assert coord.offsets.get("g", TOPIC, 0) is None and _markers(storage, 0) == []  # decided, not on disk yet
    assert coord.init_producer_id("tx", 10_000)[0] == ErrorCode.concurrent_transactions
    coord.save_now()
    coord.complete_commit("tx", decided=True)
    assert coord.offsets.get("g", TOPIC, 0) == CommittedOffset(5, -1, "m", 1_000)
    assert not coord.has_pending_offsets("g", TOPIC, 0)
    assert _markers(storage, 0) == [(1, MarkerType.COMMIT)]
    assert _markers(storage, 1) == [(0, MarkerType.COMMIT)]  # added without data: marked too
    assert _commit(coord, "tx", pid, epoch) == ErrorCode.none  # a retry
    assert coord.end_txn("tx", pid, epoch, False) == ErrorCode.invalid_txn_state
    assert len(_markers(storage, 0)) == 1


def test_abort_drops_offsets_and_records_the_aborted_range(storage: Storage) -> None:
    coord = _coordinator(storage, FakeClock(1_000))
    _, pid, epoch = coord.init_producer_id("tx", 10_000)
    coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
    coord.add_offsets("tx", pid, epoch, "g")
    coord.commit_offsets("tx", pid, epoch, "g", {(TOPIC, 0): CommittedOffset(5, -1, "", 0)})
    _produce(coord, storage, pid, epoch, 0, b"a")
    _produce(coord, storage, pid, epoch, 0, b"b")
    assert coord.end_txn("tx", pid, epoch, False) == ErrorCode.none
    assert coord.offsets.get("g", TOPIC, 0) is None
    assert coord.indexes.get(storage.log(TOPIC, 0)).aborted == [AbortedTxn(pid, 0, 2)]


def test_timeout_aborts_and_fences(storage: Storage) -> None:
    clock = FakeClock(1_000)
    coord = _coordinator(storage, clock)
    _, pid, epoch = coord.init_producer_id("tx", 5_000)
    coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
    _produce(coord, storage, pid, epoch, 0, b"slow")
    clock.advance(5_000)
    assert coord.abort_expired() == []
    clock.advance(1)
    assert coord.abort_expired() == ["tx"]
    assert _markers(storage, 0) == [(1, MarkerType.ABORT)]
    assert coord.end_txn("tx", pid, epoch, True) == ErrorCode.producer_fenced
    assert coord.indexes.get(storage.log(TOPIC, 0)).last_stable_offset(2) == 2


def test_state_survives_a_restart_and_open_transactions_are_aborted(tmp_path: Path) -> None:
    clock = FakeClock(1_000)
    ids = _Ids()
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic(TOPIC, 1)
        coord = _coordinator(storage, clock, ids)
        _, pid, epoch = coord.init_producer_id("done", 10_000)
        coord.add_partitions("done", pid, epoch, [(TOPIC, 0)])
        _commit(coord, "done", pid, epoch)
        _, open_pid, open_epoch = coord.init_producer_id("open", 10_000)
        coord.add_partitions("open", open_pid, open_epoch, [(TOPIC, 0)])
        _produce(coord, storage, open_pid, open_epoch, 0, b"lost")
        coord.save_now()  # as each request's answer waits for
    with Storage.open(tmp_path / "data") as storage:
        coord = _coordinator(storage, clock, ids)
        done, opened = coord.get("done"), coord.get("open")
        assert done is not None and (done.producer_id, done.state) == (pid, TxnState.COMPLETE_COMMIT)
        assert opened is not None and opened.state is TxnState.COMPLETE_ABORT
        assert opened.producer_epoch == open_epoch + 1  # fenced
        assert _markers(storage, 0) == [(0, MarkerType.COMMIT), (2, MarkerType.ABORT)]
        txns = coord.indexes.get(storage.log(TOPIC, 0))  # rebuilt from the log
        assert txns.aborted == [AbortedTxn(open_pid, 1, 2)] and txns.last_stable_offset(3) == 3


def test_a_decided_commit_found_at_start_is_completed(tmp_path: Path) -> None:
    """A crash between the PrepareCommit write and the markers: the start writes them and
    applies the offsets."""
    clock = FakeClock(1_000)
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic(TOPIC, 1)
        coord = _coordinator(storage, clock)
        _, pid, epoch = coord.init_producer_id("tx", 10_000)
        coord.add_partitions("tx", pid, epoch, [(TOPIC, 0)])
        coord.add_offsets("tx", pid, epoch, "g")
        coord.commit_offsets("tx", pid, epoch, "g", {(TOPIC, 0): CommittedOffset(1, -1, "", 0)})
        _produce(coord, storage, pid, epoch, 0, b"x")
        txn = coord.get("tx")
        assert txn is not None
        txn.state = TxnState.PREPARE_COMMIT  # what _prepare writes before the markers
        coord.file.write(coord.transactions())
    with Storage.open(tmp_path / "data") as storage:
        coord = _coordinator(storage, clock)
        assert _markers(storage, 0) == [(1, MarkerType.COMMIT)]
        assert coord.offsets.get("g", TOPIC, 0) is not None
        again = coord.get("tx")
        assert again is not None and again.state is TxnState.COMPLETE_COMMIT


def test_a_state_file_that_is_not_ours_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "transactions.json").write_text('{"version": 9, "transactions": []}')
    with pytest.raises(StateFileError):
        TxnStateFile(tmp_path).read()
    (tmp_path / "transactions.json").write_text("[1, 2")
    with pytest.raises(StateFileError):
        TxnStateFile(tmp_path).read()


def test_idle_transactional_ids_expire(storage: Storage) -> None:
    clock = FakeClock(1_000)
    offsets = OffsetStore(storage)
    offsets.load()
    coord = TransactionCoordinator(
        storage, offsets, TxnIndexes(), _Ids(), clock=clock, id_expiration_ms=10_000
    )
    _, pid, epoch = coord.init_producer_id("idle", 5_000)
    _, busy_pid, busy_epoch = coord.init_producer_id("busy", 5_000)
    clock.advance(9_000)
    coord.add_partitions("busy", busy_pid, busy_epoch, [(TOPIC, 0)])
    _commit(coord, "busy", busy_pid, busy_epoch)
    clock.advance(2_000)
    coord.abort_expired()
    assert coord.get("idle") is None and coord.get("busy") is not None
    coord.save_now()
    assert coord.check_produce(pid, epoch, TOPIC, 0) == ErrorCode.invalid_txn_state
    assert [t.transactional_id for t in coord.file.read()] == ["busy"]


def test_flush_writes_off_the_loop_once_for_many_changes_and_reports_failure(storage: Storage) -> None:
    import asyncio

    coord = _coordinator(storage, FakeClock(1_000))

    async def run() -> tuple[list[bool], bool]:
        for i in range(5):
            coord.init_producer_id(f"tx-{i}", 10_000)
        together = await asyncio.gather(*(coord.flush() for _ in range(3)))
        assert sorted(t.transactional_id for t in coord.file.read()) == [f"tx-{i}" for i in range(5)]
        coord.file.path.unlink()
        coord.file.path.mkdir()  # the rename over it fails
        coord.init_producer_id("tx-late", 10_000)
        return list(together), await coord.flush()

    together, late = asyncio.run(run())
    assert together == [True, True, True] and late is False


def test_a_walk_in_two_parts_equals_one_and_load_builds_it_in_a_thread(storage: Storage) -> None:
    """TxnIndexes.load walks up to the log end in a thread, then the rest on the loop:
    the two parts must give what one walk gives, across segments."""
    import asyncio

    from logtrove.txn.partition import scan

    coord = _coordinator(storage, FakeClock(1_000))
    log = storage.log(TOPIC, 0)
    for round_ in range(6):
        _, pid, epoch = coord.init_producer_id(f"tx-{round_ % 2}", 10_000)
        coord.add_partitions(f"tx-{round_ % 2}", pid, epoch, [(TOPIC, 0)])
        _produce(coord, storage, pid, epoch, 0, b"v")
        log.append(build_batch([NewRecord(b"plain")]))
        if round_ % 3 == 0:
            coord.end_txn(f"tx-{round_ % 2}", pid, epoch, False)
        log.roll()
    whole = scan(log)
    assert whole.aborted and whole.open
    for cut in range(log.log_end_offset + 1):
        parts = scan(log, start=cut, into=scan(log, end=cut))
        assert (parts.open, parts.aborted) == (whole.open, whole.aborted), cut
    fresh = TxnIndexes()
    loaded = asyncio.run(fresh.load(log))
    everything = fresh.aborted_between(log, loaded, 0, log.log_end_offset + 1)
    assert (loaded.open, everything) == (whole.open, whole.aborted)
    assert loaded.files_to == log.active.base_offset  # the sealed segments' entries: in files
    assert loaded.aborted == [a for a in whole.aborted if a.last_offset >= loaded.files_to]
    assert asyncio.run(fresh.load(log)) is loaded is fresh.get(log)


def test_aborted_between_matches_a_brute_force_search() -> None:
    import random

    rng = random.Random(18)
    txns = PartitionTxns()
    offset = 0
    for pid in range(300):
        first = offset + rng.randrange(5)
        txns.on_transactional_batch(pid, first)
        offset = first + 1 + (rng.randrange(400) if pid % 17 == 0 else rng.randrange(5))  # a few long ones
        txns.on_marker(pid, MarkerType.ABORT, offset)
        offset += 1
    for _ in range(2_000):
        start = rng.randrange(offset + 10)
        end = start + rng.randrange(50)
        expected = [a for a in txns.aborted if a.last_offset >= start and a.first_offset < end]
        assert txns.aborted_between(start, end) == expected, (start, end)


def test_a_followed_partition_learns_the_leaders_markers(storage: Storage) -> None:
    """A mirror appends the leader's batches (markers included) with append_replicated:
    its transaction state follows them without any coordinator."""
    log = storage.log(TOPIC, 0)
    log.follower = True
    indexes = TxnIndexes()
    assert indexes.get(log).last_stable_offset(0) == 0
    data = build_batch(
        [NewRecord(b"a")], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True
    )
    log.append_replicated(data)
    assert indexes.get(log).last_stable_offset(log.log_end_offset) == 0
    marker = bytearray(marker_batch(9, 0, False, coordinator_epoch=0, now_ms=1))
    marker[:8] = (1).to_bytes(8, "big")  # the leader's offset
    log.append_replicated(bytes(marker))
    txns = indexes.get(log)
    assert txns.last_stable_offset(log.log_end_offset) == 2
    assert txns.aborted == [AbortedTxn(9, 0, 1)]


def test_the_state_file_holds_every_id_when_only_one_entry_is_encoded_again(tmp_path: Path) -> None:
    clock = FakeClock(1_000)
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic(TOPIC, 1)
        coord = _coordinator(storage, clock)
        for i in range(50):
            coord.init_producer_id(f"tx-{i}", 10_000)
        coord.save_now()
        _, pid, epoch = coord.init_producer_id("tx-7", 10_000)
        coord.add_partitions("tx-7", pid, epoch, [(TOPIC, 0)])
        coord.save_now()
        on_disk = {t.transactional_id: t.to_json() for t in coord.file.read()}
        assert on_disk == {t.transactional_id: t.to_json() for t in coord.transactions()}
        assert on_disk["tx-7"]["state"] == "Ongoing" and on_disk["tx-7"]["producer_epoch"] == 1
    with Storage.open(tmp_path / "data") as storage:
        coord = _coordinator(storage, clock)  # aborts tx-7: the one entry changed, all kept
        coord.init_producer_id("tx-new", 10_000)
        coord.save_now()
        assert len(coord.file.read()) == 51


def test_a_partition_that_refuses_markers_for_good_ends_the_transaction(storage: Storage) -> None:
    """A transaction whose partition became a mirror's (it takes no client markers): the
    commit completes on the other partition with one marker, not one per retry round,
    and the transactional ID takes InitProducerId again."""
    storage.create_topic("copied", 1)
    clock = FakeClock(1_000)
    coord = _coordinator(storage, clock)
    _, pid, epoch = coord.init_producer_id("t", 30_000)
    assert coord.unmarkable([("copied", 0)]) == {}
    assert coord.add_partitions("t", pid, epoch, [(TOPIC, 0), ("copied", 0)]) == ErrorCode.none
    _produce(coord, storage, pid, epoch, 0, b"v")
    storage.follow_topic("copied", "source.example:9092")
    assert coord.unmarkable([("copied", 0), (TOPIC, 0)]) == {("copied", 0): ErrorCode.invalid_topic_exception}
    assert _commit(coord, "t", pid, epoch) == ErrorCode.none
    for _ in range(3):
        clock.advance(1_000)
        coord.abort_expired()
    assert [kind for _, kind in _markers(storage, 0)] == [MarkerType.COMMIT]
    assert storage.log("copied", 0).log_end_offset == 0
    assert coord.get("t") is not None and coord.get("t").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
    code, _, new_epoch = coord.init_producer_id("t", 30_000)
    assert (code, new_epoch) == (ErrorCode.none, epoch + 1)


def test_a_stuck_transaction_left_in_the_state_file_completes_at_load(storage: Storage) -> None:
    """A decided transaction naming a mirrored partition, as a state file written before
    the refusal holds it: the next start completes it instead of retrying for ever."""
    storage.create_topic("copied", 1, followed_from="source.example:9092")
    clock = FakeClock(1_000)
    stuck = TransactionMetadata("old", 1001, 0, 30_000)
    stuck.state, stuck.partitions = TxnState.PREPARE_COMMIT, {(TOPIC, 1), ("copied", 0)}
    file = TxnStateFile(storage.path)
    file.write_bytes(file.frame([file.encode_entry(stuck)]))
    reloaded = _coordinator(storage, clock)
    assert reloaded.get("old").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert [kind for _, kind in _markers(storage, 1)] == [MarkerType.COMMIT]
    assert reloaded.init_producer_id("old", 30_000)[0] == ErrorCode.none
