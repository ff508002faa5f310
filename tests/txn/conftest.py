"""Fixtures of the transaction tests (see :mod:`tests.txn.committed_data`)."""

from tests.txn.committed_data import oracle, written  # noqa: F401
