"""A Hypothesis state machine drives a partition log with tiny segments and index
intervals (so that rolls and index entries happen all the time) through appends, reads,
time lookups, rolls, retention, DeleteRecords and clean or crash-like reopens, and checks
every answer against an in-memory model: the same records, at the same offsets, always."""

from __future__ import annotations

import itertools
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from logtrove.records import Compression, NewRecord, build_batch
from logtrove.storage import PartitionLog, Storage
from logtrove.testing import FakeClock

from .helpers import RAM_DIR, TOPIC, decode_batches

HOUR = 3_600_000
RecordSpec = tuple[bytes | None, int, int, bool, int]


@dataclass(frozen=True)
class Stored:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


record_strategy = st.builds(
    lambda key, size, seed, headers, skew: (key, size, seed, headers, skew),
    st.one_of(st.none(), st.binary(max_size=8)),
    st.integers(0, 400),
    st.integers(0, 2**32),
    st.booleans(),
    st.one_of(st.integers(-HOUR, HOUR), st.sampled_from([-30 * HOUR, 30 * HOUR])),
)
batch_strategy = st.tuples(
    st.lists(record_strategy, min_size=1, max_size=12), st.sampled_from(list(Compression))
)


class PartitionLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="logtrove-model-", dir=RAM_DIR))
        self.clock = FakeClock()
        self.model: list[Stored] = []  # every record ever appended, offset order
        self.batches: list[tuple[int, int]] = []  # (base, last) of every batch appended
        self.log_start = 0
        self.storage: Storage | None = None

    # -- setup and helpers ---------------------------------------------------------------
    @initialize(
        segment_bytes=st.integers(1024, 4096),
        index_interval=st.sampled_from([0, 1, 64, 200, 512]),
    )
    def open_log(self, segment_bytes: int, index_interval: int) -> None:
        self.storage = Storage.open(self.dir / "data", clock=self.clock)
        self.storage.create_topic(
            TOPIC,
            1,
            {"segment.bytes": str(segment_bytes), "index.interval.bytes": str(index_interval)},
        )

    @property
    def log(self) -> PartitionLog:
        assert self.storage is not None
        return self.storage.log(TOPIC, 0)

    @property
    def end(self) -> int:
        return len(self.model)

    def visible(self) -> list[Stored]:
        return self.model[self.log_start :]

    def teardown(self) -> None:
        if self.storage is not None:
            self.storage.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- rules ---------------------------------------------------------------------------
    @rule(requests=st.lists(st.lists(batch_strategy, min_size=1, max_size=3), min_size=1, max_size=6))
    def append(self, requests: list[list[tuple[list[RecordSpec], Compression]]]) -> None:
        for request in requests:
            self._append_one(request)
            self.clock.advance(random.Random(len(self.model)).randint(0, 60_000))

    @rule(request=st.lists(batch_strategy, min_size=1, max_size=3))
    def append_again(self, request: list[tuple[list[RecordSpec], Compression]]) -> None:
        self._append_one(request)

    def _append_one(self, request: list[tuple[list[RecordSpec], Compression]]) -> None:
        data = b""
        new: list[list[NewRecord]] = []
        for specs, compression in request:
            records = []
            for key, size, seed, with_header, skew in specs:
                value = random.Random(seed).randbytes(size)
                headers = (("h", key),) if with_header else ()
                records.append(NewRecord(value, key, headers, self.clock.now_ms() + skew))
            new.append(records)
            data += build_batch(records, compression=compression)
        result = self.log.append(data)
        assert result.base_offset == self.end
        for records in new:
            base = self.end
            self.batches.append((base, base + len(records) - 1))
            for r in records:
                assert r.timestamp is not None
                self.model.append(Stored(len(self.model), r.timestamp, r.key, r.value, r.headers))
        assert result.last_offset == self.end - 1
        assert result.record_count == sum(len(r) for r in new)

    @rule(where=st.floats(0, 1), max_bytes=st.integers(0, 6000))
    def read(self, where: float, max_bytes: int) -> None:
        offset = self.log_start + int(where * (self.end - self.log_start))
        result = self.log.read(offset, max_bytes)
        assert (result.log_start_offset, result.log_end_offset) == (self.log_start, self.end)
        if offset == self.end:
            assert result.size == 0 and result.first_offset is None
            return
        batches = list(decode_batches(result.data()))
        assert batches, "a read below the log end returns at least one batch"
        first_base, first_last, _ = batches[0]
        assert (first_base, first_last) in self.batches
        assert first_base <= offset <= first_last
        assert result.first_offset == first_base
        sizes = result.size
        if len(batches) > 1:
            assert sizes <= max_bytes
        expected_next = first_base
        for base, last, records in batches:
            assert base == expected_next
            expected_next = last + 1
            assert [Stored(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == self.model[
                base : last + 1
            ]

    @rule(data=st.data())
    def offset_for_timestamp(self, data: st.DataObject) -> None:
        visible = self.visible()
        stamps = sorted({r.timestamp for r in visible})
        near = [t + d for t in stamps[:50] for d in (-1, 0, 1)]
        target = data.draw(
            st.one_of(
                st.sampled_from(near), st.integers(-2 * HOUR, 2 * HOUR).map(lambda d: self.clock.ms + d)
            )
            if near
            else st.integers(0, 2**42)
        )
        expected = next(((r.offset, r.timestamp) for r in visible if r.timestamp >= target), None)
        found = self.log.offset_for_timestamp(target)
        assert (None if found is None else (found.offset, found.timestamp)) == expected

    @rule()
    def max_timestamp_offset(self) -> None:
        visible = self.visible()
        found = self.log.max_timestamp_offset()
        if not visible:
            assert found is None
            return
        top = max(r.timestamp for r in visible)
        first = next(r for r in visible if r.timestamp == top)
        assert found is not None
        assert (found.offset, found.timestamp) == (first.offset, top)

    @rule()
    def roll(self) -> None:
        before = self.log.segments
        self.log.roll()
        after = self.log.segments
        if before[-1].size == 0:
            assert len(after) == len(before)
        else:
            assert len(after) == len(before) + 1 and after[-1].base_offset == self.end

    @rule(ms=st.integers(0, 3 * HOUR))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    def _expect_deletions(self, doomed: list[int]) -> None:
        assert self.storage is not None
        self.storage.write_checkpoints()
        if doomed:
            self.log_start = max(self.log_start, self.log.segments[0].base_offset)
        assert self.log.log_start_offset == self.log_start

    def _segments_on_disk(self) -> list[tuple[int, int, int]]:
        """(base, next base, file size) of each segment, from the directory listing."""
        files = sorted(self.log.directory.glob("*.log"))
        bases = [int(p.name[:-4]) for p in files]
        nexts = [*bases[1:], self.end]
        return [(b, n, p.stat().st_size) for b, n, p in zip(bases, nexts, files, strict=True)]

    @rule(limit=st.integers(0, 20_000))
    def retention_by_bytes(self, limit: int) -> None:
        assert self.storage is not None
        self.storage.alter_topic_configs(TOPIC, {"retention.bytes": str(limit)})
        segments = self._segments_on_disk()
        total = sum(size for _, _, size in segments)
        expected = []
        for base, _next, size in segments[:-1]:
            if total - size < limit:
                break
            total -= size
            expected.append(base)
        assert self.log.apply_retention() == expected
        self.storage.alter_topic_configs(TOPIC, delete_configs=["retention.bytes"])
        self._expect_deletions(expected)

    @rule(age=st.integers(0, 4 * HOUR))
    def retention_by_time(self, age: int) -> None:
        assert self.storage is not None
        self.storage.alter_topic_configs(TOPIC, {"retention.ms": str(age)})
        expected = []
        for base, nxt, _size in self._segments_on_disk()[:-1]:
            newest = max((r.timestamp for r in self.model[base:nxt]), default=-1)
            if newest < 0 or self.clock.now_ms() - newest <= age:
                break
            expected.append(base)
        assert self.log.apply_retention() == expected
        self.storage.alter_topic_configs(TOPIC, delete_configs=["retention.ms"])
        self._expect_deletions(expected)

    @rule(where=st.floats(0, 1))
    def delete_records(self, where: float) -> None:
        self._delete_records(int(where * self.end))

    def _delete_records(self, offset: int) -> None:
        assert self.storage is not None
        start = self.storage.truncate_before(TOPIC, 0, offset)
        self.log_start = max(self.log_start, offset)
        assert start == self.log_start
        assert all(seg.next_offset > self.log_start for seg in self.log.segments[:-1])

    @precondition(lambda self: self.end > self.log_start)
    @rule()
    def delete_records_up_to_the_newest(self) -> None:
        """DeleteRecords just past the record with the largest timestamp: the log's
        largest timestamp is then invisible, in the segment holding the log start."""
        top = max(self.visible(), key=lambda r: r.timestamp)
        self._delete_records(top.offset + 1)

    @rule()
    def purge_deleted_files(self) -> None:
        self.clock.advance(60_001)
        self.log.purge_deleted()
        assert not list(self.log.directory.glob("*.deleted"))

    @rule()
    def reopen_clean(self) -> None:
        assert self.storage is not None
        self.storage.close()
        self.storage = Storage.open(self.dir / "data", clock=self.clock)
        assert self.storage.clean_shutdown
        self.check_everything()

    @rule()
    def reopen_after_crash(self) -> None:
        assert self.storage is not None
        self.storage.abandon()
        self.storage = Storage.open(self.dir / "data", clock=self.clock)
        assert not self.storage.clean_shutdown
        self.check_everything()

    @precondition(lambda self: self.end > 0)
    @rule()
    def read_only_view_agrees(self) -> None:
        assert self.storage is not None
        self.storage.flush_all()
        reader = Storage.open(self.dir / "data", read_only=True, clock=self.clock)
        try:
            log = reader.log(TOPIC, 0)
            assert log.log_end_offset == self.end
            assert [r.offset for r in log.records()] == [r.offset for r in self.visible()]
        finally:
            reader.close()

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def offsets_match(self) -> None:
        if self.storage is None:
            return
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.log_start

    @invariant()
    def segments_are_well_formed(self) -> None:
        if self.storage is None:
            return
        segments = self.log.segments
        segment_bytes = self.log.config.segment_bytes
        for seg, nxt in itertools.pairwise(segments):
            assert seg.next_offset == nxt.base_offset, "segments are contiguous"
            assert seg.size > 0, "only the active segment may be empty"
            if seg.size > segment_bytes:  # only a segment holding one oversized batch
                assert len(list(seg.batches())) == 1
        assert segments[0].base_offset <= self.log_start

    def check_everything(self) -> None:
        got = [Stored(r.offset, r.timestamp, r.key, r.value, r.headers) for r in self.log.records()]
        assert got == self.visible()


SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class TestPartitionLogAgreesWithModel(PartitionLogMachine.TestCase):  # type: ignore[misc,name-defined]
    settings = settings(SETTINGS, max_examples=80, stateful_step_count=40)


@pytest.mark.slow
class TestPartitionLogAgreesWithModelLonger(PartitionLogMachine.TestCase):  # type: ignore[misc,name-defined]
    settings = settings(SETTINGS, max_examples=400, stateful_step_count=60)
