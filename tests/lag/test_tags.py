"""Tag expressions, and exact tag counting / reading from .tagidx against brute force."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import crc32c
import pytest
import xxhash
from tests.lag.helpers import TOPIC, MixedTopic, write_mixed_topic

from logtrove.groups.tags import (
    InvalidTagExpressionError,
    TagFilter,
    count_matching,
    fetch_matching,
    first_matching,
)
from logtrove.records import NewRecord, build_batch
from logtrove.storage import Storage
from logtrove.storage.derived import tagindex
from logtrove.storage.derived.blockfile import BLOCK_HEADER, MAGIC, read_blocks
from logtrove.storage.derived.indexer import Indexer
from logtrove.storage.derived.paths import derived_path


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> MixedTopic:
    return write_mixed_topic(tmp_path_factory.mktemp("tags") / "data")


def test_expression_parsing() -> None:
    assert TagFilter.parse("*").match_all
    assert TagFilter.parse("  ").match_all
    f = TagFilter.parse(" TagA ||TagB||  TagA ")
    assert f.tags == (b"TagA", b"TagB")
    assert str(f) == "TagA || TagB"
    assert f == TagFilter.parse("TagA || TagB")
    assert f.matches(b"TagB") and not f.matches(b"TagC") and not f.matches(None)
    assert TagFilter.parse("*").matches(None)
    for bad in ("TagA ||", "||", "TagA || * ", "a |||| b", "x" * 1001):
        with pytest.raises(InvalidTagExpressionError):
            TagFilter.parse(bad)


def test_counts_equal_brute_force_at_many_points(mixed: MixedTopic) -> None:
    rng = random.Random(5)
    with Storage.open(mixed.path, read_only=True) as storage:
        for p in (0, 1):
            log = storage.log(TOPIC, p)
            end = log.log_end_offset
            assert end == len(mixed.tags[p])
            for expression in ("TagA", "TagB || TagD", "TagC||TagA||TagB", "TagZ"):
                wanted = TagFilter.parse(expression)
                for start in [0, 1, end - 1, end, *(rng.randrange(end) for _ in range(8))]:
                    got = count_matching(log, wanted, start)
                    assert got.matching == mixed.count(p, wanted, start), (p, expression, start)
                    assert got.records_scanned == 0, "fully indexed: no record decoded"
                    assert got.entries_read < 2 * 4096, "whole blocks are counted from their tag lists"
            # an inner range [a, b)
            a, b = end // 3, 2 * end // 3
            assert count_matching(log, TagFilter.parse("TagA"), a, b).matching == mixed.count(
                p, TagFilter.parse("TagA"), a, b
            )


def test_counts_agree_with_decoding_every_record(mixed: MixedTopic) -> None:
    with Storage.open(mixed.path, read_only=True) as storage:
        log = storage.log(TOPIC, 0)
        decoded = [r.header("tag") for r in log.records()]
        assert decoded == mixed.tags[0]
        wanted = TagFilter.parse("TagB")
        assert count_matching(log, wanted, 0).matching == sum(t == b"TagB" for t in decoded)


def test_unindexed_tail_is_scanned_and_exact(tmp_path: Path) -> None:
    topic = write_mixed_topic(tmp_path / "data", partitions=1, batches_per_partition=20)
    with Storage.open(topic.path) as storage:
        log = storage.log(TOPIC, 0)
        indexed_end = log.log_end_offset
        extra = [NewRecord(b"x", None, (("tag", b"TagA" if i % 3 else b"TagC"),), 0) for i in range(300)]
        log.append(build_batch(extra))
        topic.tags[0] += [r.headers[0][1] for r in extra]
        wanted = TagFilter.parse("TagA")
        got = count_matching(log, wanted, 100)
        assert got.matching == topic.count(0, wanted, 100)
        assert got.records_scanned == log.log_end_offset - indexed_end
        Indexer(storage).catch_up()
        again = count_matching(log, wanted, 100)
        assert again.matching == got.matching and again.records_scanned == 0


def test_unindexed_topic_is_counted_by_scanning(tmp_path: Path) -> None:
    topic = write_mixed_topic(tmp_path / "data", partitions=1, batches_per_partition=8, index=False)
    with Storage.open(topic.path, read_only=True) as storage:
        log = storage.log(TOPIC, 0)
        wanted = TagFilter.parse("TagD || TagA")
        got = count_matching(log, wanted, 17)
        assert got.matching == topic.count(0, wanted, 17)
        assert got.entries_read == 0


def _colliding_tags() -> tuple[bytes, bytes]:
    seen: dict[int, bytes] = {}
    i = 0
    while True:
        tag = b"T%d" % i
        h = xxhash.xxh3_64_intdigest(b"t:" + tag) & 0xFFFFFFFF
        if h in seen:
            return seen[h], tag
        seen[h] = tag
        i += 1


def test_hash_collisions_are_detected_and_rechecked(tmp_path: Path) -> None:
    first, second = _colliding_tags()
    assert first != second and tagindex.tag_hash(first) == tagindex.tag_hash(second)
    with Storage.open(tmp_path / "data") as storage:
        storage.create_topic("c", 1)
        log = storage.log("c", 0)
        tags = [first if i % 2 else second for i in range(500)] + [b"other"] * 100
        log.append(build_batch([NewRecord(b"v", None, (("tag", t),), 0) for t in tags[:500]]))
        log.append(build_batch([NewRecord(b"v", None, (("tag", t),), 0) for t in tags[500:]]))
        Indexer(storage, block_records=500).catch_up()
        wanted = TagFilter.parse(first.decode())
        whole = count_matching(log, wanted, 0)
        assert (whole.matching, whole.records_scanned, whole.blocks_counted) == (250, 0, 2), "tag lists count"
        cut = count_matching(log, wanted, 100)
        assert cut.matching == 200
        assert cut.records_scanned == 400, "only the cut block holding both tags is re-checked"
        other = count_matching(log, TagFilter.parse("other"), 100)
        assert (other.matching, other.records_scanned, other.entries_read) == (100, 0, 400)
        fetched = fetch_matching(log, wanted, 0, 1000)
        assert [r.offset for r in fetched.records] == [i for i, t in enumerate(tags) if t == first]


def _rewrite_as(version: int, path: Path, base_offset: int) -> None:
    """Turn a .tagidx file into what older indexers wrote: version 1 had no tag list,
    version 2 a tag list without record counts."""
    out = b""
    raw = path.read_bytes()
    for b in read_blocks(path, tagindex.KIND, base_offset):
        payload = raw[b.payload_position : b.file_end]
        (length,) = struct.unpack_from(">H", payload)
        pos = 2 + length
        (count,) = struct.unpack_from(">H", payload, pos)
        listed = []
        pos += 2
        if count != tagindex.NOT_LISTED:
            for _ in range(count):
                size = struct.unpack_from(">H", payload, pos)[0]
                listed.append(payload[pos : pos + 2 + size])
                pos += 2 + size + 4
        head = payload[: 2 + length]
        if version == 2:
            head += struct.pack(">H", count) + b"".join(listed)
        old = head + payload[pos:]
        out += BLOCK_HEADER.pack(
            MAGIC,
            tagindex.KIND,
            version,
            0,
            b.start_offset,
            b.end_offset,
            b.end_position,
            len(old),
            crc32c.crc32c(old),
        )
        out += old
    path.write_bytes(out)


@pytest.mark.parametrize("version", [1, 2])
def test_older_blocks_are_read_exactly(tmp_path: Path, version: int) -> None:
    topic = write_mixed_topic(tmp_path / "data", partitions=1, batches_per_partition=10)
    with Storage.open(topic.path) as storage:
        log = storage.log(TOPIC, 0)
        for seg in log.segments:
            _rewrite_as(version, derived_path(seg, tagindex.SUFFIX), seg.base_offset)
        for seg in log.segments:
            blocks = read_blocks(derived_path(seg, tagindex.SUFFIX), tagindex.KIND, seg.base_offset)
            assert blocks and all(b.version == version for b in blocks)
        wanted = TagFilter.parse("TagC")
        got = count_matching(log, wanted, 10)
        assert got.matching == topic.count(0, wanted, 10)
        assert got.blocks_counted == 0, "no record counts before version 3"
        assert (got.records_scanned > 0) == (version == 1), "version 2 lists tags: no re-check"
        name, entries = tagindex.read_entries(
            *_open_first(derived_path(log.segments[0], tagindex.SUFFIX), log.segments[0].base_offset)
        )
        assert name == "tag" and len(entries) > 0


def _open_first(path: Path, base: int) -> tuple[int, tagindex.Block, int]:
    import os

    return os.open(path, os.O_RDONLY), read_blocks(path, tagindex.KIND, base)[0], base


def test_fetch_returns_every_match_and_moves_past_the_rest(mixed: MixedTopic) -> None:
    with Storage.open(mixed.path, read_only=True) as storage:
        log = storage.log(TOPIC, 1)
        wanted = TagFilter.parse("TagB || TagC")
        expected = [o for o, t in enumerate(mixed.tags[1]) if wanted.matches(t)]
        got: list[int] = []
        position = 0
        while position < log.log_end_offset:
            fetched = fetch_matching(log, wanted, position, 333)
            assert all(wanted.matches(r.header("tag")) for r in fetched.records)
            assert fetched.next_offset > position
            got += [r.offset for r in fetched.records]
            position = fetched.next_offset
        assert got == expected
        first = first_matching(log, TagFilter.parse("TagD"), 100)
        assert first is not None
        assert first.offset == next(o for o in range(100, len(mixed.tags[1])) if mixed.tags[1][o] == b"TagD")
        assert first_matching(log, TagFilter.parse("Nope"), 0) is None
