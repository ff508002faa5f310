"""The timestamps of a segment's unindexed tail, summarised once for every range scan.

A partition under steady produce has an unindexed tail (the records after the last
index block, up to a block's worth: tens of thousands of records, megabytes) that no
``.skip`` block covers, so a time-range scan read and framed all of it, every query,
even when the window is far in the past. :func:`tail_bounds` keeps, per segment and tail
start, the smallest and largest record timestamp of the tail read so far and extends it
with the batches appended since: a scan whose window misses them skips the covered tail
in one step, and each batch is read once per process instead of once per query.

The summary counts every record of the data batches (control batches hold no data;
LogAppendTime batches count their append time), so "no record of the covered range is
stamped in the window" holds whatever else the scan filters on. It stops growing at a
batch it cannot read (damaged, or compressed past the decompression limit): from there
the scan reads the log as before. Entries are keyed by the segment file (path, inode)
and the tail's start position, which moves when the indexer writes a block; a bounded
LRU drops the old ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from logtrove.records import HEADER_SIZE, BatchHeader, RecordsError, read_header
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE, MIN_BATCH_LENGTH
from logtrove.records.pick import time_bounds
from logtrove.records.record import batch_payload
from logtrove.storage import Segment

_ENTRIES = 256
_FIRST_CHUNK = 64 * 1024  # a scan's first read per range, growing 4× up to _CHUNK
_CHUNK = 1024 * 1024
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass
class _Tail:
    end: int  # positions [start, end) are summarised
    lo: int = _INT64_MAX
    hi: int = _INT64_MIN
    stuck: bool = False  # a batch at ``end`` could not be read: the summary stops there
    lock: threading.Lock = field(default_factory=threading.Lock)


def append_time(header: BatchHeader) -> int | None:
    """Every record's timestamp in a LogAppendTime batch, else ``None``."""
    return header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None


def batches_in(seg: Segment, start: int, end: int) -> Iterator[tuple[BatchHeader, bytes, int]]:
    """(header, buffer, position in buffer) of each whole batch in ``[start, end)``; the
    reads start at :data:`_FIRST_CHUNK` and grow (a limited scan often stops early)."""
    pos = start
    chunk_size = _FIRST_CHUNK
    while pos + HEADER_SIZE <= end:
        chunk = seg.read(pos, min(chunk_size, end - pos))
        chunk_size = min(chunk_size * 4, _CHUNK)
        rel = 0
        while rel + HEADER_SIZE <= len(chunk):
            try:
                header = read_header(chunk, rel)
            except RecordsError:
                return
            size = header.size
            if header.batch_length < MIN_BATCH_LENGTH or pos + rel + size > end:
                return
            if rel + size > len(chunk):
                if rel:
                    break
                chunk = seg.read(pos, size)
            yield header, chunk, rel
            rel += size
        if rel == 0:
            return
        pos += rel


_tails: OrderedDict[tuple[str, int, int], _Tail] = OrderedDict()
_tails_lock = threading.Lock()


def tail_bounds(seg: Segment, start: int, end: int) -> tuple[int, int, int]:
    """``(covered, lo, hi)``: every record of the data batches in ``[start, covered)`` of
    ``seg`` is stamped within ``[lo, hi]`` (``lo > hi`` when there is none), ``covered``
    ≤ ``end``; only batches not summarised before are read."""
    key = (str(seg.log_path), seg.inode, start)
    with _tails_lock:
        tail = _tails.get(key)
        if tail is None:
            tail = _tails[key] = _Tail(start)
            while len(_tails) > _ENTRIES:
                _tails.popitem(last=False)
        else:
            _tails.move_to_end(key)
    with tail.lock:
        if tail.end < end and not tail.stuck:
            position = tail.end
            for header, buf, rel in batches_in(seg, tail.end, end):
                if not header.is_control:
                    appended = append_time(header)
                    try:
                        if appended is not None:
                            lo = hi = appended
                        else:
                            lo, hi = time_bounds(batch_payload(buf, header, rel), header.base_timestamp)
                    except (ValueError, RecordsError):
                        tail.stuck = True
                        break
                    tail.lo, tail.hi = min(tail.lo, lo), max(tail.hi, hi)
                position += header.size
                tail.end = position
        return min(tail.end, end), tail.lo, tail.hi
