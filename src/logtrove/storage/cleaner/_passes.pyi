"""Type stub of the compiled twin of :mod:`logtrove.storage.cleaner.passes`."""

from logtrove.records.batch import Buffer
from logtrove.storage.cleaner.passes import Table

def map_records(
    table: bytearray,
    capacity: int,
    size: int,
    payload: Buffer,
    base_offset: int,
    record_count: int,
    first_dirty: int,
    limit: int,
    /,
) -> tuple[int, int | None]: ...
def filter_records(
    table: Table,
    layout: int,
    payload: Buffer,
    base_offset: int,
    record_count: int,
    base_ts: int,
    append_ts: int | None,
    batch_horizon: int | None,
    now: int,
    new_horizon: int,
    end: int,
    /,
) -> tuple[bytes | None, int, int, int, int, int, int, int | None]: ...
def digest_keys(ends: Buffer, data: Buffer, rows: int, large: bool, offset: int, /) -> bytes: ...
def map_entries(digests: Buffer, offsets: Buffer, rows: int, /) -> bytes: ...
