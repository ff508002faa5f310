"""The full-parse stage of a content search: which records of a candidate batch match.

A batch that passed the raw prefilter (:meth:`Predicate.may_match_batch`) is decoded by
the columnar decoder (:mod:`logtrove.records.columnar`, compiled) into one buffer of its
values back to back plus their end offsets, with no Python object per record. The
predicate then searches that buffer in a few calls instead of once per value, and only
the rows it lands on are tested exactly, on their own value::

    data   |{"a":1}|{"a":22}||{"b":3}|        values back to back (a null takes no bytes)
    ends   0       7        15 15      22     row i is data[ends[i]:ends[i + 1]]

Why a search of the buffer finds every matching row (it may find more; those fail the
exact test):

* ``Contains`` and a JSON field's literal: a value holding the bytes puts them in the
  buffer at the same place. The search resumes at the start of the row after each hit.
* a regex without anchors or word boundaries: its match in a value is a match in any
  text containing the value, so in the buffer too; RE2 reports the leftmost, which is at
  or before it.
* a regex with ``^``, ``$``, ``\\b`` or ``\\B``: the values are joined by newlines and the
  pattern runs in multi-line mode, where ``^`` and ``$`` also hold at every value's
  edges, and a newline, like an edge, is not a word character. Patterns with ``\\A``,
  ``\\z`` or inline flags that could turn multi-line off are tested value by value.
* any other predicate (a JSON field with a number): every row.

The rows found are then checked against the offset range and the time window, and the
offsets returned; the caller yields those records, decoded as before
(:func:`logtrove.records.iter_records`), so a search returns exactly what testing every
record did. A batch the decoder finds malformed gives ``None``: the caller walks it
record by record as before (it yields the records before the damage, then skips it).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextlib import suppress
from typing import Any

from logtrove.query.errors import InvalidQueryError
from logtrove.query.predicates import Contains, JsonField, Predicate, Regex, compile_regex
from logtrove.records import BatchHeader, CorruptRecordError
from logtrove.records.batch import ATTR_TIMESTAMP_TYPE
from logtrove.records.columnar import Decoder, new_decoder

_NO_END = 2**63 - 1
# constructs whose meaning a newline-joined, multi-line search would not keep
_NOT_LINEWISE = re.compile(r"\\[Az]|\(\?[a-zA-Z]*-[a-zA-Z]*m")


def batch_decoder() -> Decoder:
    """A decoder for :func:`matching_offsets` (values only; id and tag are not used)."""
    return new_decoder(b"", b"", False)


def matching_offsets(
    decoder: Decoder,
    payload: bytes,
    header: BatchHeader,
    predicate: Predicate,
    begin: int,
    to_offset: int | None,
    window: tuple[int | None, int | None],
) -> set[int] | None:
    """Offsets of the records of the batch (decompressed ``payload``) in ``[begin,
    to_offset)``, stamped within ``window`` (ms, ``[start, end)``), whose value passes
    ``predicate``; ``None`` when the batch is malformed or holds another number of
    records than its header says (the caller then decodes it record by record).

    The whole batch is decoded, so that its record count can be checked."""
    append_ts = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
    end = _NO_END if to_offset is None else to_offset
    try:
        rows = decoder.add(payload, header.base_offset, header.base_timestamp, append_ts, 0, _NO_END)
    except CorruptRecordError:
        return None
    _, offsets, micros, _, _, value, *_ = decoder.take()
    if rows != header.record_count:
        return None
    nulls, validity, ends_raw, data, large = value
    ends = memoryview(ends_raw).cast("q" if large else "i")
    offsets_of = memoryview(offsets).cast("q")
    micros_of = memoryview(micros).cast("q")
    start_ms, end_ms = window
    found: set[int] = set()
    for row in _candidate_rows(predicate, data, ends, rows):
        if nulls and validity is not None and not validity[row >> 3] & (1 << (row & 7)):
            continue  # a null value matches no predicate
        if not begin <= offsets_of[row] < end:
            continue
        ts = micros_of[row] // 1000
        if (start_ms is not None and ts < start_ms) or (end_ms is not None and ts >= end_ms):
            continue
        if predicate.matches(data[ends[row] : ends[row + 1]]):
            found.add(offsets_of[row])
    return found


def _candidate_rows(predicate: Predicate, data: bytes, ends: Sequence[int], rows: int) -> Iterator[int]:
    """Rows that may match, in order, each once (a superset of the matching rows)."""
    if rows == 0:
        return iter(())
    if isinstance(predicate, Contains):
        return _rows_holding(predicate.text, data, ends)
    if isinstance(predicate, JsonField) and predicate.literal is not None:
        return _rows_holding(predicate.literal, data, ends)
    if isinstance(predicate, Regex) and not predicate.matches_empty:
        # (a pattern that matches the empty text matches every value: nothing to search)
        if predicate.prefilters:
            return _rows_searched(predicate.regex, data, ends)
        linewise = _linewise(predicate.pattern)
        if linewise is not None:
            return _rows_searched_joined(linewise, data, ends, rows)
    return iter(range(rows))


def _rows_holding(needle: bytes, data: bytes, ends: Sequence[int]) -> Iterator[int]:
    pos = 0
    while (hit := data.find(needle, pos)) >= 0:
        row = bisect_right(ends, hit) - 1
        yield row
        pos = ends[row + 1]


def _rows_searched(regex: Any, data: bytes, ends: Sequence[int]) -> Iterator[int]:
    pos = 0
    while (m := regex.search(data, pos)) is not None:
        row = bisect_right(ends, m.start()) - 1  # a match is not empty: it starts in a value
        yield row
        pos = ends[row + 1]


def _rows_searched_joined(regex: Any, data: bytes, ends: Sequence[int], rows: int) -> Iterator[int]:
    """As :func:`_rows_searched`, over the values joined by newlines: row ``i`` starts at
    ``ends[i] + i`` there."""
    joined = b"\n".join(map(data.__getitem__, map(slice, ends[:-1], ends[1:])))  # no bytecode per row
    pos = 0
    while pos <= len(joined) and (m := regex.search(joined, pos)) is not None:
        row = bisect_right(range(rows), m.start(), key=lambda i: ends[i] + i) - 1
        yield row
        pos = ends[row + 1] + row + 1


_LINEWISE: dict[str, Any | None] = {}


def _linewise(pattern: str) -> Any | None:
    """``pattern`` in multi-line mode, or ``None`` if that could miss a match."""
    if pattern not in _LINEWISE:
        if len(_LINEWISE) > 256:
            _LINEWISE.clear()
        compiled = None
        if not _NOT_LINEWISE.search(pattern):
            with suppress(InvalidQueryError):  # a \\Q without \\E would quote the ")"
                compiled = compile_regex(f"(?m:{pattern})")
        _LINEWISE[pattern] = compiled
    return _LINEWISE[pattern]
