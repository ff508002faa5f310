"""The filter options (``key``, ``id``, ``tag``, ``contains``): one meaning, tested on a
decoded record or on a decoded Arrow batch.

A record passes when every option given holds (an empty :class:`RecordFilter` passes
everything)::

    key        its key equals the option's bytes             (a null key never does)
    id / tag   the value of its last header called the topic's message.id.header /
               message.tag.header equals the option's UTF-8 bytes
                                                              (no such header, or a null value, never)
    contains   its value holds the option's bytes             (a null value never does)

:func:`record_matches` is that definition over a :class:`~logtrove.records.Record`
(direct mode verifies the query engine's answers with it). :func:`keep_rows` is the same
test over the columns of the columnar decoder (:mod:`logtrove.spark.columns`), with
:mod:`pyarrow.compute`: remote mode decodes whole fetched batches and keeps the rows it
passes, with no Python object per record.

The columns are not the raw bytes in one place: ``id`` and ``tag`` are UTF-8 text, with
bytes that are not UTF-8 replaced by U+FFFD. A header ``b"\\xffx"`` shows as
``"\\ufffdx"`` but does not equal the option ``"\\ufffdx"`` (``b"\\xef\\xbf\\xbdx"``). So a
filter whose ``id`` or ``tag`` holds U+FFFD, or whose ``contains`` is not UTF-8 (Arrow's
substring search takes text), cannot be answered on the columns:
:func:`columnar_exact` says so, and those reads test records one by one.
"""

from __future__ import annotations

from typing import Any

from logtrove.records import Record
from logtrove.spark.options import RecordFilter

_REPLACEMENT = "\ufffd"


def record_matches(record: Record, flt: RecordFilter, id_header: str, tag_header: str) -> bool:
    """Whether ``record`` passes ``flt`` (see the module doc)."""
    if flt.key is not None and record.key != flt.key:
        return False
    if flt.id is not None and record.header(id_header) != flt.id.encode():
        return False
    if flt.tag is not None and record.header(tag_header) != flt.tag.encode():
        return False
    return flt.contains is None or (record.value is not None and flt.contains in record.value)


def columnar_exact(flt: RecordFilter) -> bool:
    """Whether :func:`keep_rows` answers ``flt`` exactly as :func:`record_matches` does."""
    texts = (t for t in (flt.id, flt.tag) if t is not None)
    if any(_REPLACEMENT in t for t in texts):
        return False
    if flt.contains is None:
        return True
    try:
        flt.contains.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def needles(flt: RecordFilter) -> tuple[bytes, ...]:
    """Byte strings that every record passing ``flt`` holds in its encoded form: a batch
    whose decompressed records lack one of them has no row that passes."""
    out = [flt.key, flt.contains, *(t.encode() for t in (flt.id, flt.tag) if t is not None)]
    return tuple(n for n in out if n)


def keep_rows(batch: Any, flt: RecordFilter) -> Any:
    """The rows of the ``pyarrow.RecordBatch`` ``batch`` (the source's columns) that pass
    ``flt``; exact when :func:`columnar_exact` says so."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tests = []
    if flt.key is not None:
        key = batch.column("key")
        tests.append(pc.equal(key, pa.scalar(flt.key, key.type)))
    for name, text in (("id", flt.id), ("tag", flt.tag)):
        if text is not None:
            column = batch.column(name)
            tests.append(pc.equal(column, pa.scalar(text, column.type)))
    if flt.contains is not None:
        tests.append(pc.match_substring(batch.column("value"), flt.contains.decode("utf-8")))
    if not tests:
        return batch
    mask = tests[0]
    for test in tests[1:]:
        mask = pc.and_(mask, test)
    return batch.filter(mask)  # a null (null key, value, id or tag) drops the row
