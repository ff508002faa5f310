"""What one index block needs from its records, collected batch by batch.

A :class:`Pending` is fed the decompressed records section of each batch of a block's
log range (:meth:`Pending.add`) and then gives the variable parts of the block's three
payloads: the ``.keyidx`` table (:func:`.keyindex.encode_table`), the ``.skip`` Bloom
filter (:func:`.skipindex.bloom_of`), the ``.tagidx`` entries and tag counts
(:mod:`.tagindex`). It is the indexer's hot loop: it runs once per record.

Two implementations give the same bytes for the same batches:

* ``logtrove.storage.derived._indexcore.Pending``, compiled from ``_indexcore.c`` when the
  package is installed with a C compiler and xxHash's header;
* :class:`PyPending`, pure Python, which defines the behaviour (2-4 µs a record, several
  times slower than a broker appends).

:func:`new_pending` picks the compiled one when :mod:`logtrove.native` gives it (unless
the environment sets ``LOGTROVE_PURE_PYTHON=1``). :data:`IMPLEMENTATION` says which one
runs.

What is collected, per record: ``k:`` + key (when the key is not null), ``i:`` + the
message-ID header value, ``h:<name>:`` + each indexed header's value (xxh3-64, with the
record's offset relative to the segment); the record's tag (its last non-null tag
header; a null one clears it); its timestamp (the batch's max timestamp for
LogAppendTime batches); the distinct tokens of its value. A malformed record raises
:class:`ValueError` and leaves the object as it was before that batch (the compiled one
may keep extra value tokens, which only make the filter say "maybe" more often).
"""

from __future__ import annotations

from array import array
from typing import Protocol

import xxhash

from logtrove.native import compiled, implementation
from logtrove.records import RecordsError
from logtrove.records.batch import Buffer
from logtrove.records.varint import decode_varint
from logtrove.storage.derived import keyindex, skipindex, tagindex


class Pending(Protocol):
    """The interface both implementations have."""

    @property
    def records(self) -> int: ...

    @property
    def min_ts(self) -> int: ...

    @property
    def max_ts(self) -> int: ...

    def add(self, payload: Buffer, rel_base: int, base_ts: int, append_ts: int | None) -> int: ...

    def key_table(self) -> bytes: ...

    def bloom(self) -> tuple[int, bytes]: ...

    def tag_entries(self) -> bytes: ...

    def tag_counts(self) -> dict[bytes, int]: ...


class PyPending:
    """The pure-Python :class:`Pending`."""

    def __init__(self, id_name: bytes, tag_name: bytes, indexed: dict[bytes, bytes]) -> None:
        self.id_name = id_name
        self.tag_name = tag_name
        self.indexed = dict(indexed)
        self.records = 0
        self.min_ts = 2**63 - 1
        self.max_ts = -(2**63)
        self._key_digests: array[int] = array("Q")
        self._key_rel: array[int] = array("I")
        self._tag_rel: array[int] = array("I")
        self._tag_hashes: array[int] = array("I")
        self._tags: dict[bytes, int] = {}
        self._tokens: set[bytes] = set()

    def add(self, payload: Buffer, rel_base: int, base_ts: int, append_ts: int | None) -> int:
        keys, tags = len(self._key_digests), len(self._tag_rel)
        try:
            count, min_ts, max_ts, values, tagged = self._parse(bytes(payload), rel_base, base_ts)
        except (IndexError, OverflowError, RecordsError) as exc:
            del self._key_digests[keys:], self._key_rel[keys:]
            del self._tag_rel[tags:], self._tag_hashes[tags:]
            raise ValueError(f"a record of the batch is malformed: {exc}") from exc
        if append_ts is not None:  # LogAppendTime: every record has the batch's time
            min_ts, max_ts = min(self.min_ts, append_ts), max(self.max_ts, append_ts)
        self.min_ts, self.max_ts = min_ts, max_ts
        if values:
            self._tokens.update(skipindex.TOKEN.findall(b"\n".join(values)))
        counts = self._tags
        for rel, tag in tagged:
            self._tag_rel.append(rel)
            self._tag_hashes.append(tagindex.tag_hash(tag))
            counts[tag] = counts.get(tag, 0) + 1
        self.records += count
        return count

    def _parse(  # noqa: PLR0915
        self, payload: bytes, rel_base: int, base_ts: int
    ) -> tuple[int, int, int, list[bytes], list[tuple[int, bytes]]]:
        """The hot loop: fields needed by the indexes, values skipped by their length.

        Written out inline (no helper calls for one- and two-byte varints) because it
        runs once per record.
        """
        key_append, rel_append = self._key_digests.append, self._key_rel.append
        digest = xxhash.xxh3_64_intdigest
        id_name, tag_name, indexed = self.id_name, self.tag_name, self.indexed
        values: list[bytes] = []
        values_append = values.append
        tags: list[tuple[int, bytes]] = []
        min_ts, max_ts = self.min_ts, self.max_ts
        end = len(payload)
        p = 0
        count = 0
        while p < end:
            b = payload[p]
            if b < 0x80:
                record_end = p + 1 + (b >> 1)
                p += 2  # length, attributes
            else:
                length, p = decode_varint(payload, p)
                record_end = p + length
                p += 1
            b = payload[p]
            if b < 0x80:
                ts = base_ts + ((b >> 1) ^ -(b & 1))
                p += 1
            else:
                ts_delta, p = decode_varint(payload, p)
                ts = base_ts + ts_delta
            b = payload[p]
            if b < 0x80:
                rel = rel_base + (b >> 1)
                p += 1
            else:
                off_delta, p = decode_varint(payload, p)
                rel = rel_base + off_delta
            b = payload[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                klen, p = decode_varint(payload, p)
            if klen >= 0:
                key_append(digest(b"k:" + payload[p : p + klen]))
                rel_append(rel)
                p += klen
            b = payload[p]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                vlen, p = decode_varint(payload, p)
            if vlen > 0:
                values_append(payload[p : p + vlen])
                p += vlen
            n = 0
            if p < record_end:
                b = payload[p]
                if b < 0x80:
                    n = b >> 1
                    p += 1
                else:
                    n, p = decode_varint(payload, p)
            if n > 0:
                tag: bytes | None = None
                for _ in range(n):
                    b = payload[p]
                    if b < 0x80:
                        nlen = b >> 1
                        p += 1
                    else:
                        nlen, p = decode_varint(payload, p)
                    name = payload[p : p + nlen]
                    p += nlen
                    b = payload[p]
                    if b < 0x80:
                        hlen = (b >> 1) ^ -(b & 1)
                        p += 1
                    else:
                        hlen, p = decode_varint(payload, p)
                    if hlen < 0:
                        if name == tag_name:
                            tag = None
                        continue
                    value = payload[p : p + hlen]
                    p += hlen
                    if name == id_name:
                        key_append(digest(b"i:" + value))
                        rel_append(rel)
                    if name == tag_name:
                        tag = value
                    prefix = indexed.get(name)
                    if prefix is not None:
                        key_append(digest(prefix + value))
                        rel_append(rel)
                if tag is not None:
                    tags.append((rel, tag))
            if p > record_end or record_end > end:
                raise IndexError("a record runs past its length or the batch")
            p = record_end
            if ts < min_ts:  # noqa: PLR1730 (a branch is cheaper than a call here)
                min_ts = ts
            if ts > max_ts:  # noqa: PLR1730
                max_ts = ts
            count += 1
        return count, min_ts, max_ts, values, tags

    def key_table(self) -> bytes:
        return keyindex.encode_table(self._key_digests, self._key_rel)

    def bloom(self) -> tuple[int, bytes]:
        return skipindex.bloom_of(skipindex.token_digest(t) for t in self._tokens)

    def tag_entries(self) -> bytes:
        return tagindex.encode_entries(self._tag_rel, self._tag_hashes)

    def tag_counts(self) -> dict[bytes, int]:
        return dict(self._tags)


NATIVE = compiled("logtrove.storage.derived._indexcore")
IMPLEMENTATION = implementation(NATIVE)


def new_pending(id_name: bytes, tag_name: bytes, indexed: dict[bytes, bytes]) -> Pending:
    """A :class:`Pending` for one block: compiled when available (see the module doc).
    ``indexed`` maps each indexed header name to its hash prefix ``h:<name>:``."""
    if NATIVE is not None:
        pending: Pending = NATIVE.Pending(id_name, tag_name, indexed)
        return pending
    return PyPending(id_name, tag_name, indexed)
