"""Type stub of the compiled twins of :func:`logtrove.records.walk.py_walk`,
:func:`logtrove.records.walk.py_first_at_or_after` and the pickers of
:mod:`logtrove.records.pick`."""

from array import array

from logtrove.records.batch import Buffer

MAX_KEYLESS_REPORTED: int

def walk(payload: Buffer, /) -> tuple[int, int, tuple[int, ...]]: ...
def first_at_or_after(
    payload: Buffer, base_ts: int, base_offset: int, timestamp: int, min_offset: int, /
) -> int | None: ...
def pick_window(
    payload: Buffer,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    start_ms: int | None,
    end_ms: int | None,
    min_offset: int,
    max_offset: int,
    limit: int = -1,
    /,
) -> (
    tuple[int, list[tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]] | None
): ...
def pick_offset(
    payload: Buffer, base_offset: int, base_ts: int, append_ts: int | None, offset: int, /
) -> tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]] | None: ...
def find_record(
    buf: Buffer, room: int, offset: int, /
) -> (
    tuple[int, tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]] | None]
    | int
    | None
): ...
def time_bounds(payload: Buffer, base_ts: int, /) -> tuple[int, int]: ...
def count_times(
    payload: Buffer, base_ts: int, base_offset: int, min_offset: int, edges: array[int], counts: array[int], /
) -> int: ...
