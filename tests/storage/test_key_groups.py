"""Lookups in a grouped ``.keyidx`` block (version 4): the compiled probe and its
pure-Python twin, the read through the file and the tail's in-memory read all agree with a
brute-force scan of the entries.

Tables are built by the writer's own :func:`keyindex.encode_table` from random digests
(many sharing a slot, some equal) and written to a real file. Damaged tables (slot ends
rewritten to anything, the file cut short) must give the same answer or the same
``ValueError`` in both twins, and never read outside the block's entries.
"""

from __future__ import annotations

import os
import struct
from array import array
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.storage.helpers import answer, digest_lists

from logtrove.storage.derived import keyindex
from logtrove.testing.old_formats import encode_chained_table, grouped_entries

COMPILED_PROBES = getattr(keyindex.NATIVE, "probe_tables", None)
COMPILED_IN_MEMORY = getattr(keyindex.NATIVE, "tables_candidates", None)
BASE = 1_000_000


def expected(digests: list[int], slots: int, digest: int) -> list[int]:
    """Brute force: the entries with the probed stored hash in the probed slot, newest first."""
    return [
        BASE + 3 * i
        for i in reversed(range(len(digests)))
        if digests[i] & 0xFFFFFFFF == digest & 0xFFFFFFFF
        and (digests[i] >> 32) & (slots - 1) == (digest >> 32) & (slots - 1)
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(digests=digest_lists, probe=st.integers(0, 2**64 - 1), pick=st.integers(0, 10_000))
def test_every_read_of_a_grouped_block_finds_exactly_the_entries_with_the_probed_hash(
    tmp_path: Path, digests: list[int], probe: int, pick: int
) -> None:
    table = keyindex.encode_table(array("Q", digests), array("I", range(0, 3 * len(digests), 3)))
    slots, n = struct.unpack_from(">II", table)
    assert len(table) == 8 + 4 * slots + 8 * n  # 8 bytes an entry (chained: 12)
    path = tmp_path / "block.keyidx"
    path.write_bytes(table)
    probes = ((table[8 : 8 + 4 * slots], 8 + 4 * slots, n, True),)
    fd = os.open(path, os.O_RDONLY)
    try:
        for digest in [probe] + ([digests[pick % len(digests)]] if digests else []):
            want = expected(digests, slots, digest)
            assert keyindex.py_probe_tables(fd, probes, digest, BASE) == [want]
            assert COMPILED_PROBES is not None and COMPILED_PROBES(fd, probes, digest, BASE) == [want]
            assert keyindex.candidates(fd, 0, BASE, digest) == want
            for in_memory in (keyindex.py_tables_candidates, COMPILED_IN_MEMORY):
                assert in_memory is not None and in_memory((table,), digest, BASE) == want
    finally:
        os.close(fd)


@settings(max_examples=100, deadline=None)
@given(digests=digest_lists)
def test_grouping_keeps_every_entry_and_only_reorders_them(digests: list[int]) -> None:
    """The grouped table holds the chained table's entries, no more, no fewer; a slot's
    ends never decrease and the last is the entry count."""
    rels = array("I", range(0, 3 * len(digests), 3))
    table = keyindex.encode_table(array("Q", digests), rels)
    slots, n = struct.unpack_from(">II", table)
    ends = struct.unpack_from(f">{slots}I", table, 8)
    assert list(ends) == sorted(ends) and ends[-1] == n == len(digests)
    hashes, back = grouped_entries(table)
    assert back == rels and list(hashes) == [d & 0xFFFFFFFF for d in digests]
    assert encode_chained_table(array("Q", digests), rels)[:8] == table[:8]  # same sizing


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    digests=digest_lists.filter(bool),
    ends=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 2**32 - 1)), max_size=4),
    cut=st.one_of(st.none(), st.integers(0, 10_000)),
    pick=st.integers(0, 10_000),
)
def test_damaged_grouped_tables_give_the_same_answer_or_the_same_error(
    tmp_path: Path, digests: list[int], ends: list[tuple[int, int]], cut: int | None, pick: int
) -> None:
    table = bytearray(keyindex.encode_table(array("Q", digests), array("I", range(0, 3 * len(digests), 3))))
    slots, n = struct.unpack_from(">II", table)
    for where, value in ends:  # slot ends rewritten to anything, even past the entries
        struct.pack_into(">I", table, 8 + 4 * (where % slots), value)
    path = tmp_path / "block.keyidx"
    path.write_bytes(table if cut is None else table[: cut % (len(table) + 1)])
    entries = 8 + 4 * slots
    probes = ((bytes(table[8:entries]), entries, n, True),)
    fd = os.open(path, os.O_RDONLY)
    try:
        digest = digests[pick % len(digests)]
        twins = [answer(f, fd, probes, digest, BASE) for f in (keyindex.py_probe_tables, COMPILED_PROBES)]
        assert twins[0] == twins[1]
        if cut is None:  # the file whole: what the read through the file finds, and every
            # offset one of the block's own (a damaged end reads nothing past the entries)
            assert twins[0] == [keyindex.candidates(fd, 0, BASE, digest)]
            assert isinstance(twins[0], list) and set(twins[0][0]) <= {BASE + 3 * i for i in range(n)}
    finally:
        os.close(fd)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    blocks=st.lists(st.tuples(digest_lists.filter(bool), st.booleans()), min_size=1, max_size=5),
    pick=st.integers(0, 10_000),
)
def test_one_call_probes_grouped_and_chained_blocks_of_one_file_each_as_its_layout_says(
    tmp_path: Path, blocks: list[tuple[list[int], bool]], pick: int
) -> None:
    """A file that an older logtrove began and this one continued: chained blocks, then
    grouped ones, probed together."""
    data, probes, wanted = b"", [], []
    everything = [d for digests, _ in blocks for d in digests]
    digest = everything[pick % len(everything)]
    for digests, grouped in blocks:
        encode = keyindex.encode_table if grouped else encode_chained_table
        table = encode(array("Q", digests), array("I", range(0, 3 * len(digests), 3)))
        slots, n = struct.unpack_from(">II", table)
        probes.append((table[8 : 8 + 4 * slots], len(data) + 8 + 4 * slots, n, grouped))
        wanted.append(expected(digests, slots, digest))
        data += table
    path = tmp_path / "blocks.keyidx"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        for probe_tables in (keyindex.py_probe_tables, COMPILED_PROBES):
            assert probe_tables is not None and probe_tables(fd, tuple(probes), digest, BASE) == wanted
    finally:
        os.close(fd)


@settings(max_examples=100, deadline=None)
@given(
    tables=st.lists(
        st.tuples(
            digest_lists, st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 2**32 - 1)), max_size=3)
        ),
        max_size=5,
    ),
    cut=st.one_of(st.none(), st.integers(0, 10_000)),
    pick=st.integers(0, 10_000),
)
def test_tables_held_in_memory_answer_alike_newest_table_first_whatever_their_damage(
    tables: list[tuple[list[int], list[tuple[int, int]]]], cut: int | None, pick: int
) -> None:
    """The tail's tables, probed in one call: each table as its own probe gives, newest
    table first; damaged slot ends read nothing outside the table, and a table cut short
    raises the same ``ValueError`` in both twins."""
    made = []
    for digests, damage in tables:
        table = bytearray(
            keyindex.encode_table(array("Q", digests), array("I", range(0, 3 * len(digests), 3)))
        )
        slots, _ = struct.unpack_from(">II", table)
        for where, value in damage:
            struct.pack_into(">I", table, 8 + 4 * (where % slots), value)
        made.append(bytes(table))
    if cut is not None and made:
        made[cut % len(made)] = made[cut % len(made)][: cut % (len(made[cut % len(made)]) + 1)]
    everything = [d for digests, _ in tables for d in digests] or [0]
    digest = everything[pick % len(everything)]
    twins = [
        answer(f, tuple(made), digest, BASE) for f in (keyindex.py_tables_candidates, COMPILED_IN_MEMORY)
    ]
    assert twins[0] == twins[1]
    if cut is None:
        each = [keyindex.py_tables_candidates((t,), digest, BASE) for t in reversed(made)]
        assert twins[0] == [offset for found in each for offset in found]


def test_tables_in_memory_refuse_what_is_not_a_table_alike() -> None:
    for in_memory in (keyindex.py_tables_candidates, COMPILED_IN_MEMORY):
        assert in_memory is not None and in_memory((), 5, 0) == []
        for tables, message in [
            ([b""], "not a tuple"),
            ((b"\x00" * 7,), "not bytes holding its counts"),
            (("table",), "not bytes holding its counts"),
            ((b"\x00\x00\x00\x03\x00\x00\x00\x00" + b"\x00" * 12,), "shorter than its counts say"),  # 3 slots
            ((b"\x00\x00\x00\x01\x00\x00\x00\x02" + b"\x00" * 4,), "shorter than its counts say"),
        ]:
            with pytest.raises(ValueError, match=message):
                in_memory(tables, 0, 0)  # type: ignore[arg-type]
