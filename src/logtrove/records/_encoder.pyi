"""Type stub of the compiled twin of :func:`logtrove.records.encoder.py_partition_order`
and :func:`~logtrove.records.encoder.py_encode_records`."""

from typing import Any

def partition_order(
    key: Any, explicit: Any, rows: int, total: int, rr_start: int
) -> tuple[bytes, bytes, int]: ...
def encode_records(
    key: Any,
    value: Any,
    ts: Any,
    headers: Any,
    rows: int,
    order: Any,
    lo: int,
    hi: int,
    budget: int,
    now_ms: int,
) -> tuple[bytes, int, int, int]: ...
