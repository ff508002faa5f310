"""Transaction metadata and the file that keeps it across restarts.

One :class:`TransactionMetadata` per transactional ID. States and moves, as Kafka's
``TransactionState``::

    Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
      ▲                                    │  ──EndTxn(abort), timeout,──▶ PrepareAbort ──markers──▶ CompleteAbort
      └──────── InitProducerId ◀───────────┘     InitProducerId, restart                        │
                                    (Complete* go back to Ongoing on the next AddPartitions) ◀──┘

The prepare states are written before the markers: a restart finds the decision and
completes it (writes the markers again and, for a commit, the group offsets).

Storage: ``transactions.json`` in the data directory, replaced atomically
(:func:`~logtrove.storage.checkpoint.atomic_write`: temp file, rename) after changes of
state, before the requests that made them are answered; with ``sync`` (the broker's
``durable_acks``) the file and the directory are fsynced too, as records are then. Without
it the state survives a crash of the broker process, as acknowledged records do under the
default ``flush.ms`` (Kafka writes ``__transaction_state`` to the page cache as well)::

    {"version": 1,
     "transactions": [{"transactional_id": "t", "producer_id": 1, "producer_epoch": 0,
                       "timeout_ms": 60000, "state": "Ongoing", "start_ms": 17…, "last_update_ms": 17…,
                       "partitions": [["topic", 0]], "groups": ["g"],
                       "offsets": [["g", "topic", 0, 42, -1, "meta"]]}]}

Why a file and not Kafka's compacted ``__transaction_state`` topic: one broker has one
coordinator and no follower to replicate the state to, so a file written atomically is
the simplest sound store; its cost is one write of every transactional ID's state per
change, fine for thousands of IDs, not for millions (DESIGN.md §Transactions).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logtrove.groups import CommittedOffset
from logtrove.storage.checkpoint import atomic_write, remove_temp_files

STATE_FILE = "transactions.json"
FORMAT_VERSION = 1


class TxnState(enum.Enum):
    """Kafka's transaction states, named as DescribeTransactions names them."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


class StateFileError(ValueError):
    """``transactions.json`` is not a state file this version understands."""


@dataclass
class TransactionMetadata:
    """The coordinator's view of one transactional ID."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    start_ms: int = -1  # when the current transaction began (Ongoing)
    last_update_ms: int = -1
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    # TxnOffsetCommit: group → partition → offset, applied to the group on commit only
    offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)

    def clear(self) -> None:
        """Forget the finished transaction's partitions, groups and offsets."""
        self.partitions.clear()
        self.groups.clear()
        self.offsets.clear()
        self.start_ms = -1

    def to_json(self) -> dict[str, Any]:
        return {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "timeout_ms": self.timeout_ms,
            "state": self.state.value,
            "start_ms": self.start_ms,
            "last_update_ms": self.last_update_ms,
            "partitions": sorted([t, p] for t, p in self.partitions),
            "groups": sorted(self.groups),
            "offsets": [
                [g, t, p, c.offset, c.leader_epoch, c.metadata]
                for g, commits in sorted(self.offsets.items())
                for (t, p), c in sorted(commits.items())
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TransactionMetadata:
        txn = cls(
            transactional_id=str(data["transactional_id"]),
            producer_id=int(data["producer_id"]),
            producer_epoch=int(data["producer_epoch"]),
            timeout_ms=int(data["timeout_ms"]),
            state=TxnState(data["state"]),
            start_ms=int(data["start_ms"]),
            last_update_ms=int(data["last_update_ms"]),
            partitions={(str(t), int(p)) for t, p in data["partitions"]},
            groups={str(g) for g in data["groups"]},
        )
        for g, t, p, offset, epoch, metadata in data["offsets"]:
            commit = CommittedOffset(int(offset), int(epoch), str(metadata), -1)
            txn.offsets.setdefault(str(g), {})[(str(t), int(p))] = commit
        return txn


class TxnStateFile:
    """``transactions.json``: every transactional ID's metadata, replaced atomically."""

    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.path = directory / STATE_FILE
        self.sync = sync

    def read(self) -> list[TransactionMetadata]:
        """The saved metadata (none if the file does not exist); a file that is not ours
        raises :class:`StateFileError` (the broker must not start and forget transactions)."""
        remove_temp_files(self.path.parent, (STATE_FILE,))
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            data = json.loads(raw)
            if data.get("version") != FORMAT_VERSION:
                raise StateFileError(
                    f"{self.path}: format version {data.get('version')!r} is not {FORMAT_VERSION}"
                )
            return [TransactionMetadata.from_json(t) for t in data["transactions"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StateFileError(f"{self.path} is not a transaction state file: {exc}") from exc

    @staticmethod
    def encode_entry(txn: TransactionMetadata) -> bytes:
        """One ID's entry of the ``transactions`` list."""
        return json.dumps(txn.to_json(), separators=(",", ":")).encode("utf-8")

    @staticmethod
    def frame(entries: list[bytes]) -> bytes:
        """The whole file around entries from :meth:`encode_entry`."""
        head = b'{"version":%d,"transactions":[' % FORMAT_VERSION
        return head + b",".join(entries) + b"]}"

    def encode(self, txns: list[TransactionMetadata]) -> bytes:
        return self.frame([self.encode_entry(t) for t in txns])

    def write_bytes(self, data: bytes) -> None:
        """Replace the file with ``data`` (from :meth:`encode`); safe in a thread."""
        atomic_write(self.path, data, sync=self.sync)

    def write(self, txns: list[TransactionMetadata]) -> None:
        self.write_bytes(self.encode(txns))
