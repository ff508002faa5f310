"""Type stub of the compiled twins of :func:`logtrove.records.walk.py_walk` and
:func:`logtrove.records.walk.py_first_at_or_after`."""

from logtrove.records.batch import Buffer

MAX_KEYLESS_REPORTED: int

def walk(payload: Buffer, /) -> tuple[int, int, tuple[int, ...]]: ...
def first_at_or_after(
    payload: Buffer, base_ts: int, base_offset: int, timestamp: int, min_offset: int, /
) -> int | None: ...
