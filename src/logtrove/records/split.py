"""Bytes holding record batches back to back, split into whole batches.

A Fetch answer's ``records`` are batches laid end to end, and the broker cuts the last
one wherever its byte limit falls (Kafka does; so does logtrove)::

    ┌──────────┬──────────┬──────────┬──────────────┐
    │ batch    │ batch    │ batch    │ part of one  │   torn tail: normal, not an error;
    └──────────┴──────────┴──────────┴──────────────┘   the reader fetches it again from
    ◄──────────── Split.batches ─────►▲  Split.torn     the next offset
                                     Split.end

:func:`whole_batches` reads only what framing needs: each batch's 12-byte length
prefix, and the 61-byte header of every batch that is all there. It tells the two kinds
of trouble apart:

* **A torn tail** (fewer than 12 bytes left, or a length that runs past the bytes
  present): the split stops before it, with ``torn`` set. Any concatenation of valid
  batches cut at any byte splits into exactly the whole batches before the cut.
* **Corruption no cut can produce** (a ``batchLength`` smaller than a header, or a
  whole batch whose magic is not 2): :class:`~logtrove.records.CorruptBatchError`
  (:class:`InvalidLengthError`, :class:`InvalidMagicError`), raised before anything is
  returned, because nothing past it can be framed.

Nothing else is checked (CRC, counts, records): each caller validates what it uses. The
mirror's follower append (:mod:`logtrove.mirror.follower`) hands the whole batches to
the log's follower append, which validates every one; a corrupt length there fails the
partition instead of being refetched forever as if it were a torn tail. The Spark
remote reader and the client's Fetch decode the records, which checks them.
"""

from __future__ import annotations

from typing import NamedTuple

from logtrove.records.batch import LOG_OVERHEAD, MIN_BATCH_LENGTH, BatchHeader, Buffer, read_header
from logtrove.records.errors import InvalidLengthError


class Split(NamedTuple):
    """The whole batches at the start of some bytes (module doc)."""

    batches: list[tuple[BatchHeader, int]]
    """Each whole batch's header and the position of its first byte, in order."""
    end: int
    """The position just past the last whole batch (the start when there is none)."""
    torn: bool
    """Whether bytes follow ``end``: the start of a batch cut short."""

    def slices(self, data: bytes) -> list[tuple[BatchHeader, bytes]]:
        """Each whole batch's header and its bytes cut from ``data`` (the bytes split)."""
        return [(h, data[p : p + h.size]) for h, p in self.batches]


def whole_batches(data: Buffer, pos: int = 0) -> Split:
    """Split ``data`` from ``pos`` into the whole batches there and a torn tail.

    Raises :class:`InvalidLengthError` for a batch whose ``batchLength`` is smaller than
    a header, :class:`~logtrove.records.InvalidMagicError` for a whole batch whose magic
    is not 2 (module doc: corruption, unlike a torn tail)."""
    batches: list[tuple[BatchHeader, int]] = []
    size = len(data)
    while size - pos >= LOG_OVERHEAD:
        length = int.from_bytes(data[pos + 8 : pos + LOG_OVERHEAD], "big", signed=True)
        if length < MIN_BATCH_LENGTH:
            raise InvalidLengthError(
                f"the batch at byte {pos} claims a batchLength of {length}, smaller than a header ({MIN_BATCH_LENGTH})"
            )
        if pos + length + LOG_OVERHEAD > size:
            break
        header = read_header(data, pos)  # all HEADER_SIZE bytes are there: length >= MIN_BATCH_LENGTH
        batches.append((header, pos))
        pos += header.size
    return Split(batches, pos, pos < size)
