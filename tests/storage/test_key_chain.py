"""The compiled hash-chain walk of a chained ``.keyidx`` block (versions 1-3, still read)
and its pure-Python twin agree.

Tables are built by the old writer (:func:`encode_chained_table`) from random digests
(many sharing a slot, some equal), written to a real file, and walked by both
implementations for digests that are and are not in the table. Every answer must equal
a brute-force scan of the entries; damaged files (cut short, links rewritten to point
forwards or past the end) must give the same answer or the same ``ValueError`` in both.
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
from logtrove.testing.old_formats import encode_chained_table

COMPILED = getattr(keyindex.NATIVE, "chain", None)
BASE = 1_000_000


def test_the_compiled_chain_walk_is_built() -> None:
    assert COMPILED is not None, "logtrove.storage.derived._indexcore lacks chain(): run `make install`"
    assert keyindex.chain is COMPILED


def walk_both(path: Path, table: bytes, digest: int) -> list[object]:
    """Each implementation's answer: a list of offsets, or the error it raised."""
    slots, n = struct.unpack_from(">II", table)
    answers: list[object] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for walk in (keyindex.py_chain, COMPILED):
            try:
                answers.append(walk(fd, 8, slots, n, digest, BASE))
            except ValueError as e:
                answers.append(("ValueError", str(e)))
    finally:
        os.close(fd)
    return answers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(digests=digest_lists, probe=st.integers(0, 2**64 - 1), pick=st.integers(0, 10_000))
def test_both_walks_find_exactly_the_entries_with_the_probed_hash(
    tmp_path: Path, digests: list[int], probe: int, pick: int
) -> None:
    table = encode_chained_table(array("Q", digests), array("I", range(0, 3 * len(digests), 3)))
    path = tmp_path / "block.keyidx"
    path.write_bytes(table)  # slot and entry counts, then the slot table at byte 8
    asked = [probe] + ([digests[pick % len(digests)]] if digests else [])
    slots, _ = struct.unpack_from(">II", table)
    for digest in asked:
        expected = [
            BASE + 3 * i
            for i in reversed(range(len(digests)))
            if digests[i] & 0xFFFFFFFF == digest & 0xFFFFFFFF
            and (digests[i] >> 32) & (slots - 1) == (digest >> 32) & (slots - 1)
        ]
        py, c = walk_both(path, table, digest)
        assert py == c == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    digests=digest_lists.filter(bool),
    cut=st.integers(0, 10_000),
    poke=st.integers(0, 10_000),
    link=st.integers(0, 2**32 - 1),
    probe_pick=st.integers(0, 10_000),
)
def test_damaged_tables_give_the_same_answer_or_the_same_error(
    tmp_path: Path, digests: list[int], cut: int, poke: int, link: int, probe_pick: int
) -> None:
    table = bytearray(encode_chained_table(array("Q", digests), array("I", range(len(digests)))))
    slots, n = struct.unpack_from(">II", table)
    entries = 8 + 4 * slots
    struct.pack_into(">I", table, entries + 12 * (poke % n) + 8, link)  # a previous link rewritten
    path = tmp_path / "block.keyidx"
    path.write_bytes(table[: 8 + cut % (len(table) - 7)])  # and the file maybe cut short
    py, c = walk_both(path, bytes(table), digests[probe_pick % len(digests)])
    assert py == c


def test_bad_arguments_are_refused_alike(tmp_path: Path) -> None:
    path = tmp_path / "empty.keyidx"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        for walk in (keyindex.py_chain, COMPILED):
            for args in [(fd, 0, 3, 1, 0, 0), (fd, 0, 0, 1, 0, 0), (fd, -1, 4, 1, 0, 0), (-1, 0, 4, 1, 0, 0)]:
                with pytest.raises(ValueError, match="bad descriptor, position or slot count"):
                    walk(*args)
            assert walk(fd, 0, 4, 0, 0, 0) == []  # no entries: nothing is read
            with pytest.raises(ValueError, match="ends inside a block's entries"):
                walk(fd, 0, 4, 1, 0, 0)
    finally:
        os.close(fd)


COMPILED_FROM = getattr(keyindex.NATIVE, "chain_from", None)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    digests=digest_lists.filter(bool),
    link=st.integers(0, 2**32 - 1),
    pick=st.integers(0, 10_000),
    cut=st.integers(0, 10_000),
)
def test_a_walk_from_a_slot_held_in_memory_answers_what_the_walk_from_the_file_does(
    tmp_path: Path, digests: list[int], link: int, pick: int, cut: int
) -> None:
    assert COMPILED_FROM is not None and keyindex.chain_from is COMPILED_FROM
    table = encode_chained_table(array("Q", digests), array("I", range(0, 3 * len(digests), 3)))
    slots, n = struct.unpack_from(">II", table)
    path = tmp_path / "block.keyidx"
    path.write_bytes(table[: 8 + cut % (len(table) - 7)])  # maybe cut short
    digest = digests[pick % len(digests)]
    (head,) = struct.unpack_from(">I", table, 8 + 4 * ((digest >> 32) & (slots - 1)))
    fd = os.open(path, os.O_RDONLY)
    try:
        answers: list[object] = []
        for walk, args in [
            (keyindex.py_chain, (fd, 8, slots, n, digest, BASE)),
            (keyindex.py_chain_from, (fd, 8 + 4 * slots, n, head, digest, BASE)),
            (COMPILED_FROM, (fd, 8 + 4 * slots, n, head, digest, BASE)),
        ]:
            try:
                answers.append(walk(*args))
            except ValueError as e:
                answers.append(("ValueError", str(e)))
        if cut % (len(table) - 7) >= 8 + 4 * slots:  # the slot itself was readable
            assert answers[0] == answers[1] == answers[2]
        else:
            assert answers[1] == answers[2]
        # any link, even one past the entries, gives the same answer or error in both twins
        twins = []
        for walk in (keyindex.py_chain_from, COMPILED_FROM):
            try:
                twins.append(walk(fd, 8 + 4 * slots, n, link, digest, BASE))
            except ValueError as e:
                twins.append(("ValueError", str(e)))
        assert twins[0] == twins[1]
    finally:
        os.close(fd)


COMPILED_PROBES = getattr(keyindex.NATIVE, "probe_tables", None)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    blocks=st.lists(digest_lists.filter(bool), min_size=1, max_size=5),
    pick=st.integers(0, 10_000),
    probe=st.integers(0, 2**64 - 1),
    cut=st.one_of(st.none(), st.integers(0, 10_000)),
)
def test_probing_every_block_in_one_call_answers_what_each_blocks_walk_does(
    tmp_path: Path, blocks: list[list[int]], pick: int, probe: int, cut: int | None
) -> None:
    """One file of several blocks (each: counts, slot table, entries), maybe cut short:
    both twins of ``probe_tables`` give, per block, what ``py_chain`` gives reading the
    slot from the file (or the same error)."""
    assert COMPILED_PROBES is not None and keyindex.probe_tables is COMPILED_PROBES
    data, places = b"", []
    for i, digests in enumerate(blocks):
        table = encode_chained_table(array("Q", digests), array("I", range(i, i + 3 * len(digests), 3)))
        slots, n = struct.unpack_from(">II", table)
        places.append((len(data), slots, n, table[8 : 8 + 4 * slots]))
        data += table
    path = tmp_path / "blocks.keyidx"
    path.write_bytes(data if cut is None else data[: cut % (len(data) + 1)])
    everything = [d for digests in blocks for d in digests]
    fd = os.open(path, os.O_RDONLY)
    try:
        for digest in (probe, everything[pick % len(everything)]):
            probes = tuple((table, pos + 8 + 4 * slots, n, False) for pos, slots, n, table in places)
            twins = [answer(f, fd, probes, digest, BASE) for f in (keyindex.py_probe_tables, COMPILED_PROBES)]
            assert twins[0] == twins[1]
            if cut is None:  # the file whole: each block as the walk from the file finds it
                assert twins[0] == [
                    keyindex.py_chain(fd, pos + 8, slots, n, digest, BASE) for pos, slots, n, _ in places
                ]
    finally:
        os.close(fd)


def test_bad_probes_are_refused_alike(tmp_path: Path) -> None:
    path = tmp_path / "empty.keyidx"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        for probe_tables in (keyindex.py_probe_tables, COMPILED_PROBES):
            assert probe_tables(fd, (), 5, 0) == []
            for grouped in (False, True):
                assert probe_tables(fd, ((b"\x00" * 8, 0, 3, grouped),), 5, 0) == [[]]  # nothing read
            for probes, message in [
                (((b"\x00" * 12, 0, 1, False),), "bad slot table"),  # 3 slots: not a power of two
                (((b"", 0, 1, True),), "bad slot table"),
                (((b"\x00" * 4, -1, 1, False),), "bad slot table"),
                (((b"\x00" * 4, 0, 2**32, True),), "bad slot table"),
                (((b"\x00" * 4, 0, 1),), "a probe is not"),  # the layout left out
                (((b"\x00" * 4, 0, 1, 1),), "a probe is not"),  # not a bool
                ((("table", 0, 1, False),), "a probe is not"),
            ]:
                with pytest.raises(ValueError, match=message):
                    probe_tables(fd, probes, 0, 0)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="bad descriptor or probes"):
                probe_tables(-1, (), 0, 0)
            with pytest.raises(ValueError, match="ends inside a block's entries"):
                probe_tables(fd, ((b"\x00\x00\x00\x01", 0, 1, False),), 0, 0)  # a link into an empty file
            with pytest.raises(ValueError, match="ends inside a block's entries"):
                probe_tables(fd, ((b"\x00\x00\x00\x01", 0, 1, True),), 0, 0)  # a slot's entry, ditto
    finally:
        os.close(fd)
