"""Type stub of the compiled twin of :func:`logtrove.records.walk.py_walk`."""

from logtrove.records.batch import Buffer

MAX_KEYLESS_REPORTED: int

def walk(payload: Buffer, /) -> tuple[int, int, tuple[int, ...]]: ...
