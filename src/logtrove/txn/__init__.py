"""Kafka transactions: the coordinator, its persisted state, the markers, and what each
partition knows of open and aborted transactions (DESIGN.md §Transactions).

Public API: :class:`TransactionCoordinator`, :class:`TxnIndexes` / :class:`PartitionTxns`
(last stable offset, aborted transactions), :class:`TxnState`.
"""

from logtrove.records import MarkerType, marker_batch, marker_type
from logtrove.txn.coordinator import DEFAULT_MAX_TIMEOUT_MS, TransactionCoordinator
from logtrove.txn.partition import AbortedTxn, PartitionTxns, TxnIndexes
from logtrove.txn.state import StateFileError, TransactionMetadata, TxnState

__all__ = [
    "DEFAULT_MAX_TIMEOUT_MS",
    "AbortedTxn",
    "MarkerType",
    "PartitionTxns",
    "StateFileError",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TxnIndexes",
    "TxnState",
    "marker_batch",
    "marker_type",
]
