"""The transaction coordinator of one broker (Kafka's ``TransactionCoordinator``).

It owns every transactional ID (FindCoordinator answers this broker for all of them),
hands out producer IDs and epochs, records which partitions and groups a transaction
touches, and ends transactions by writing markers (:mod:`logtrove.records.markers`) to every
partition of the transaction; a commit also applies the transaction's group offsets.

Fencing: each InitProducerId bumps the ID's epoch, so a request (or produced batch) of
an older epoch is from a zombie: the transactional APIs answer ``PRODUCER_FENCED``, a
produce ``INVALID_PRODUCER_EPOCH`` (what Kafka's log layer answers). A transaction still
open when InitProducerId comes, when its ``transaction_timeout_ms`` passes, or when the
broker restarts is aborted, and the epoch is bumped first so its producer cannot go on
writing into it. A decision (PrepareCommit / PrepareAbort) found at a restart is carried
out.

Everything runs on the broker's event loop: the appends of markers are appends as any
produce is, and no lock is needed. The state file is written off the loop: a change marks
the state dirty, and :meth:`TransactionCoordinator.flush` (awaited by each handler before it
answers) writes the latest state in a thread, one write shared by every change made
meanwhile. A commit's decision is on disk before its first marker (EndTxn: ``end_txn``,
``flush``, ``complete_commit``); an abort's markers may precede its state, since a restart
that finds the transaction still open aborts it again, which changes nothing.

A marker is never retried forever. A partition that cannot take one for a reason that
will not go away by waiting (:data:`PERMANENT_REFUSALS`: a mirrored partition, which
only its source writes, a partition left closed as unsafe, a topic deleted) is skipped
with an error in the log, and the transaction completes on the others, freeing its
transactional ID; AddPartitionsToTxn refuses a mirrored partition up front
(:meth:`TransactionCoordinator.unmarkable`), so only a state written before, or a topic
that changed since it was added, gets there. Only a failure that may pass (a full or
failing disk) leaves the transaction decided and retried each round, and a retry writes
only the markers still missing (the partitions already marked are remembered until the
transaction completes; after a restart they are marked again, which changes nothing).
Kafka's coordinator answers EndTxn before it writes the markers too, and drops a
partition whose topic is gone from the markers it still has to send.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace

from kio.schema.errors import ErrorCode

from logtrove.clock import Clock
from logtrove.groups import CommittedOffset, OffsetStore
from logtrove.records import MarkerType, marker_batch
from logtrove.storage import (
    InvalidTopicError,
    Storage,
    StorageError,
    UnknownPartitionError,
    UnknownTopicError,
    UnsafePartitionError,
)
from logtrove.txn.partition import TxnIndexes
from logtrove.txn.state import TransactionMetadata, TxnState, TxnStateFile

log = logging.getLogger("logtrove.txn")

DEFAULT_MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms
DEFAULT_ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000  # Kafka's transactional.id.expiration.ms
MAX_EPOCH = 32767  # an epoch is an int16; the last one is never handed out
COORDINATOR_EPOCH = 0  # one coordinator that never moves: its epoch never changes
PERMANENT_REFUSALS = (InvalidTopicError, UnsafePartitionError, UnknownTopicError, UnknownPartitionError)
"""Why a partition may refuse a marker for good (InvalidTopicError includes a followed
topic's FollowedTopicError): waiting does not change them, so the marker is skipped."""


class TransactionCoordinator:
    """Transactional IDs, their producer IDs, epochs and open transactions."""

    def __init__(
        self,
        storage: Storage,
        offsets: OffsetStore,
        indexes: TxnIndexes,
        new_producer_id: Callable[[], int],
        *,
        clock: Clock,
        notify: Callable[[], None] = lambda: None,
        max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
        id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS,
        sync: bool = True,
    ) -> None:
        self.storage = storage
        self.offsets = offsets
        self.indexes = indexes
        self.new_producer_id = new_producer_id
        self.clock = clock
        self.notify = notify
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self.file = TxnStateFile(storage.path, sync=sync)
        self._txns: dict[str, TransactionMetadata] = {}
        self._by_producer: dict[int, TransactionMetadata] = {}
        self._version = 0  # bumped by every change of state
        self._written = 0  # the version the state file holds
        self._write_lock = asyncio.Lock()
        self._encoded: dict[str, bytes] = {}  # each ID's entry in the state file
        self._dirty: set[str] = set()  # IDs whose entry changed since it was encoded
        self._committing: set[str] = set()  # PrepareCommit not yet on disk: markers must wait
        self._background: set[asyncio.Task[bool]] = set()
        self._marked: dict[str, set[tuple[str, int]]] = {}  # partitions a decided txn has marked

    # -- start ---------------------------------------------------------------------------
    def load(self) -> None:
        """Read the state file, then finish what a crash left: a decided transaction is
        completed, an open one aborted (its producer fenced)."""
        for txn in self.file.read():
            self._txns[txn.transactional_id] = txn
            self._by_producer[txn.producer_id] = txn
        self._dirty = set(self._txns)
        for txn in list(self._txns.values()):
            if txn.state is TxnState.ONGOING:
                log.info("aborting transaction %r, open when the broker stopped", txn.transactional_id)
                self._fence_and_abort(txn)
            elif txn.state.preparing:
                self._complete(txn)
        self.save_now()

    # -- the state file --------------------------------------------------------------------
    def save_now(self) -> None:
        """Write the state file if it changed (blocking: start, stop, tests)."""
        if self._written < self._version:
            version = self._version
            self.file.write_bytes(self._encode())
            self._written = version

    async def flush(self) -> bool:
        """Make every change made so far durable (the file written in a thread, off the
        loop; concurrent callers share a write). ``False`` if it could not be written."""
        target = self._version
        async with self._write_lock:
            if self._written >= target:
                return True
            version = self._version
            data = self._encode()
            try:
                await asyncio.to_thread(self.file.write_bytes, data)
            except OSError as exc:
                log.error("cannot write %s: %s", self.file.path, exc)
                return False
            self._written = version
            return True

    def flush_later(self) -> None:
        """Schedule :meth:`flush` without waiting for it."""
        task = asyncio.get_running_loop().create_task(self.flush())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- the APIs ------------------------------------------------------------------------
    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> tuple[ErrorCode, int, int]:
        """InitProducerId with a transactional ID: (error, producer ID, epoch).

        A first call creates the ID's producer ID at epoch 0; every later one bumps the
        epoch (a new producer ID once the epoch is exhausted), aborting an open
        transaction first. A caller naming its current producer ID and epoch (KIP-360,
        v3+) must name the current ones."""
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, -1, -1
        txn = self._txns.get(transactional_id)
        if txn is None:
            txn = TransactionMetadata(transactional_id, self.new_producer_id(), 0, timeout_ms)
            txn.last_update_ms = self.clock.now_ms()
            self._txns[transactional_id] = txn
            self._by_producer[txn.producer_id] = txn
            self._save(txn)
            return ErrorCode.none, txn.producer_id, txn.producer_epoch
        if producer_id >= 0:
            if producer_id != txn.producer_id:
                return ErrorCode.invalid_producer_id_mapping, -1, -1
            if producer_epoch != txn.producer_epoch:
                return ErrorCode.producer_fenced, -1, -1
        if txn.state.preparing and transactional_id not in self._committing:
            self._complete(txn)  # a marker write failed earlier: try again
        if txn.state.preparing:
            return ErrorCode.concurrent_transactions, -1, -1
        if txn.state is TxnState.ONGOING:
            self._fence_and_abort(txn)
        self._bump_epoch(txn)
        txn.timeout_ms = timeout_ms
        self._save(txn)
        return ErrorCode.none, txn.producer_id, txn.producer_epoch

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> ErrorCode:
        """AddPartitionsToTxn (the caller has checked that the partitions exist)."""
        txn, error = self._current(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return error
        new = set(partitions) - txn.partitions
        if new or txn.state is not TxnState.ONGOING:
            self._begin(txn)
            txn.partitions |= new
            self._save(txn)
        return ErrorCode.none

    def unmarkable(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """The partitions (of existing topics) that could never take this coordinator's
        markers, with the error AddPartitionsToTxn answers for them: a followed (mirrored)
        topic's, which only its source writes. INVALID_TOPIC_EXCEPTION, as Produce answers
        a client's write to it (Kafka's answer to a write to a topic it may not append to,
        which clients do not retry)."""
        refused = {}
        for topic, partition in partitions:
            if self.storage.topic(topic).followed_from is not None:
                refused[(topic, partition)] = ErrorCode.invalid_topic_exception
        return refused

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group: str
    ) -> ErrorCode:
        """AddOffsetsToTxn: the transaction will commit offsets of ``group``."""
        txn, error = self._current(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return error
        if group not in txn.groups or txn.state is not TxnState.ONGOING:
            self._begin(txn)
            txn.groups.add(group)
            self._save(txn)
        return ErrorCode.none

    def commit_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group: str,
        commits: dict[tuple[str, int], CommittedOffset],
    ) -> ErrorCode:
        """TxnOffsetCommit: the offsets wait in the transaction and reach the group only
        when it commits. The group must have been added (AddOffsetsToTxn)."""
        txn, error = self._current(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return error
        if txn.state is not TxnState.ONGOING or group not in txn.groups:
            return ErrorCode.invalid_txn_state
        txn.offsets.setdefault(group, {}).update(commits)
        self._save(txn)
        return ErrorCode.none

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """EndTxn: decide. An abort is carried out at once; a commit waits for its decision
        to be on disk — the caller awaits :meth:`flush`, then calls :meth:`complete_commit`.
        Asking again for the outcome a transaction already had is answered without error
        (a retry); the other outcome, or ending no transaction, is INVALID_TXN_STATE."""
        txn, error = self._current(transactional_id, producer_id, producer_epoch, allow_preparing=True)
        if txn is None:
            return error
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if txn.state in (done, preparing):
            return ErrorCode.none
        if txn.state is not TxnState.ONGOING:
            return ErrorCode.invalid_txn_state
        self._prepare(txn, preparing)
        if commit:
            self._committing.add(transactional_id)
        else:
            self._complete(txn)
        return ErrorCode.none

    def complete_commit(self, transactional_id: str, *, decided: bool) -> None:
        """Write the markers and offsets of a commit decided by :meth:`end_txn`, once
        ``decided`` (its decision is on disk); if not, :meth:`abort_expired` retries it."""
        self._committing.discard(transactional_id)
        txn = self._txns.get(transactional_id)
        if decided and txn is not None and txn.state is TxnState.PREPARE_COMMIT:
            self._complete(txn)

    def check_produce(self, producer_id: int, producer_epoch: int, topic: str, partition: int) -> ErrorCode:
        """Whether a transactional batch may be appended: its producer's transaction is
        open at this epoch and the partition was added to it."""
        txn = self._by_producer.get(producer_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.invalid_txn_state
        if producer_epoch != txn.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if txn.state is not TxnState.ONGOING or (topic, partition) not in txn.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    def has_pending_offsets(self, group: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of the group's partition (OffsetFetch
        with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT then)."""
        return any((topic, partition) in t.offsets.get(group, ()) for t in self._txns.values())

    def abort_expired(self) -> list[str]:
        """Abort the transactions open longer than their timeout (fencing their producers),
        retry the markers of decided ones whose markers could not be written, and forget
        the transactional IDs idle (no transaction open) for ``id_expiration_ms``, as
        Kafka's ``transactional.id.expiration.ms`` does (the state must not grow without
        bound). Returns the transactional IDs aborted."""
        now = self.clock.now_ms()
        aborted = []
        idle = [
            t
            for t in self._txns.values()
            if t.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            and now - t.last_update_ms > self.id_expiration_ms
        ]
        for txn in idle:
            del self._txns[txn.transactional_id]
            self._by_producer.pop(txn.producer_id, None)
            self._encoded.pop(txn.transactional_id, None)
            self._dirty.discard(txn.transactional_id)
        if idle:
            self._save(None)
        for txn in list(self._txns.values()):
            if txn.state is TxnState.ONGOING and now - txn.start_ms > txn.timeout_ms:
                log.info(
                    "aborting transaction %r: open longer than %d ms", txn.transactional_id, txn.timeout_ms
                )
                self._fence_and_abort(txn)
                self._save(txn)
                aborted.append(txn.transactional_id)
            elif txn.state.preparing and txn.transactional_id not in self._committing:
                self._complete(txn)
        return aborted

    def transactions(self) -> list[TransactionMetadata]:
        return list(self._txns.values())

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._txns.get(transactional_id)

    # -- moves ---------------------------------------------------------------------------
    def _current(
        self, transactional_id: str, producer_id: int, producer_epoch: int, *, allow_preparing: bool = False
    ) -> tuple[TransactionMetadata | None, ErrorCode]:
        """The metadata if the caller is its current producer, else the error to answer."""
        txn = self._txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return None, ErrorCode.invalid_producer_id_mapping
        if producer_epoch != txn.producer_epoch:
            return None, ErrorCode.producer_fenced
        if txn.state.preparing and not allow_preparing:
            return None, ErrorCode.concurrent_transactions
        return txn, ErrorCode.none

    def _begin(self, txn: TransactionMetadata) -> None:
        now = self.clock.now_ms()
        if txn.state is not TxnState.ONGOING:
            txn.state = TxnState.ONGOING
            txn.start_ms = now
        txn.last_update_ms = now

    def _bump_epoch(self, txn: TransactionMetadata) -> None:
        if txn.producer_epoch + 1 >= MAX_EPOCH:
            self._by_producer.pop(txn.producer_id, None)
            txn.producer_id, txn.producer_epoch = self.new_producer_id(), 0
            self._by_producer[txn.producer_id] = txn
        else:
            txn.producer_epoch += 1
        txn.last_update_ms = self.clock.now_ms()

    def _fence_and_abort(self, txn: TransactionMetadata) -> None:
        """Abort the open transaction at a bumped epoch: the markers carry the new epoch
        and the old producer's next request is fenced."""
        if txn.producer_epoch + 1 < MAX_EPOCH:  # else the next InitProducerId moves to a new ID
            txn.producer_epoch += 1
        self._prepare(txn, TxnState.PREPARE_ABORT)
        self._complete(txn)

    def _prepare(self, txn: TransactionMetadata, state: TxnState) -> None:
        txn.state = state
        txn.last_update_ms = self.clock.now_ms()
        self._save(txn)

    def _complete(self, txn: TransactionMetadata) -> None:
        """Write the markers of a decided transaction, apply its offsets on commit, and
        move it to Complete*. If a marker cannot be written for now the transaction stays
        decided and :meth:`abort_expired` tries again (module doc: a partition that
        refuses it for good is skipped instead)."""
        commit = txn.state is TxnState.PREPARE_COMMIT
        try:
            self._write_markers(txn, commit)
            if commit:
                now = self.clock.now_ms()
                for group, commits in txn.offsets.items():
                    self.offsets.commit(
                        group, {tp: replace(c, commit_timestamp=now) for tp, c in commits.items()}
                    )
        except (OSError, StorageError) as exc:
            log.warning("cannot complete transaction %r yet: %s", txn.transactional_id, exc)
            return
        self._marked.pop(txn.transactional_id, None)
        txn.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        txn.clear()
        txn.last_update_ms = self.clock.now_ms()
        self._save(txn)

    def _write_markers(self, txn: TransactionMetadata, commit: bool) -> None:
        """Append the marker to each partition of the transaction not marked yet; a
        partition that refuses it for good (:data:`PERMANENT_REFUSALS`) is skipped and
        logged. Raises what may pass (OSError, other storage errors): the caller retries."""
        batch = marker_batch(
            txn.producer_id,
            txn.producer_epoch,
            commit,
            coordinator_epoch=COORDINATOR_EPOCH,
            now_ms=self.clock.now_ms(),
        )
        kind = MarkerType.COMMIT if commit else MarkerType.ABORT
        marked = self._marked.setdefault(txn.transactional_id, set())
        try:
            for topic, partition in sorted(txn.partitions - marked):
                if not self.storage.has_topic(topic) or partition >= self.storage.topic(topic).partitions:
                    continue  # deleted since: nothing left to mark
                try:
                    plog = self.storage.log(topic, partition)
                    self.indexes.get(plog)  # loaded before the append, which it must not see
                    appended = plog.append(batch)
                except PERMANENT_REFUSALS as exc:
                    log.error(
                        "transaction %r: no %s marker for %s-%d, which cannot take one (%s); "
                        "the transaction completes without it",
                        txn.transactional_id,
                        kind.name,
                        topic,
                        partition,
                        exc,
                    )
                else:
                    self.indexes.on_marker(plog, txn.producer_id, kind, appended.base_offset)
                marked.add((topic, partition))
        finally:
            self.notify()

    def _save(self, txn: TransactionMetadata | None) -> None:
        """Mark ``txn`` (or only the set of IDs) changed: the next :meth:`flush` writes it."""
        if txn is not None:
            self._dirty.add(txn.transactional_id)
        self._version += 1

    def _encode(self) -> bytes:
        """The state file's bytes: the entries changed since the last call encoded again,
        the others reused, so a change costs its own entry, not every ID's."""
        for tid in self._dirty:
            txn = self._txns.get(tid)
            if txn is None:
                self._encoded.pop(tid, None)
            else:
                self._encoded[tid] = self.file.encode_entry(txn)
        self._dirty.clear()
        return self.file.frame(list(self._encoded.values()))
