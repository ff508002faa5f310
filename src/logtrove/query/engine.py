"""The query engine: one entry point, :meth:`QueryEngine.run`, for the CLI, HTTP and Spark.

How each question is answered (per partition; partitions are then merged):

=============  ===========================================================================
offset         the batch holding the offset (sparse offset index), or the next surviving
               data record (compacted away, a gap, a transaction marker; below the log
               start: the first record); past the end is an error
position ID    decoded to (topic, partition, offset), then read as an offset: no index
time           the first record with timestamp ≥ T (time index, then a short scan)
time range     from the first record ≥ T1, ``.skip`` blocks whose [min, max] miss
               [T1, T2) are skipped; records filtered by timestamp (clients may send
               them out of order, so the range is not cut at the first record ≥ T2)
key / header   ``.keyidx`` hash slots newest first, each candidate checked against the
/ client ID    record; the unindexed tail from in-memory tables, what they miss scanned
content        batches read in order; ``.skip`` token filters and time bounds skip
               blocks, the raw-batch prefilter skips batches, records are parsed only
               in batches that can match; partitions in parallel threads
               (:mod:`.content`), a byte budget (and the engine's time budget) checked
               before each batch
=============  ===========================================================================

Results stream as they are found. A multi-result query stops at ``limit`` and its
:class:`~logtrove.query.model.Completion` carries a cursor that continues exactly after
the last result returned, per partition. On a read-only opening (a broker holds the
directory) the engine refreshes the segment lists before each query.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Generator, Iterator

from logtrove.query.content import search_content
from logtrove.query.errors import InvalidQueryError, MessageNotFoundError
from logtrove.query.ids import decode_position_id, id_time
from logtrove.query.model import (
    Completion,
    ContentQuery,
    HeaderQuery,
    IdQuery,
    KeyQuery,
    Message,
    OffsetQuery,
    PositionQuery,
    Query,
    QueryResult,
    RangeQuery,
    Reason,
    Stats,
    TimeQuery,
    decode_cursor,
    encode_cursor,
)
from logtrove.query.partition import Attribute, Budget, lookup_newest_first, scan_forward
from logtrove.records import Record
from logtrove.records.pick import first_stamped
from logtrove.records.record import batch_payload, decode_record, record_span
from logtrove.storage import OffsetOutOfRangeError, PartitionLog, Storage
from logtrove.storage.derived.keyindex import header_digest, id_digest, key_digest
from logtrove.storage.txnview import CommittedView, committed_view

Generated = Generator[Message, None, Completion]
_NEWEST = "newest"


_Signature = tuple[tuple[int, ...], tuple[int, ...]]
"""What :meth:`QueryEngine._signature` sees of a topic's files: (directories and file
identities, active segment sizes)."""


class QueryEngine:
    """Answers :data:`~logtrove.query.model.Query` values over one storage.

    ``content_time_limit_s`` bounds every content search in time, whatever byte budget
    its question asks for (a server sets it so that no request can keep a worker busy
    for long); past it the search ends with :attr:`Reason.BUDGET` and a cursor.
    """

    def __init__(
        self, storage: Storage, *, workers: int | None = None, content_time_limit_s: float | None = None
    ) -> None:
        self.storage = storage
        self.workers = workers or max(2, min(8, os.cpu_count() or 2))
        self.content_time_limit_s = content_time_limit_s
        self._seen: dict[str | None, _Signature | None] = {}

    # -- entry point -----------------------------------------------------------------------
    def run(self, query: Query, *, read_committed: bool = True) -> QueryResult:
        """Start answering ``query``; iterate the result for messages, then read its
        ``completion``. Raises storage errors for unknown topics/partitions and
        :class:`InvalidQueryError` for malformed questions before any result.

        ``read_committed`` (the default) shows what a read_committed consumer would see:
        no record of an aborted transaction, nothing at or past a partition's last stable
        offset (:mod:`logtrove.storage.txnview`); ``False`` shows every data record.
        Transaction markers are never shown."""
        c = read_committed
        topic = getattr(query, "topic", None)
        if self.storage.read_only:
            self._refresh(topic)
        if topic is not None:  # unknown topics and partitions fail now, not at the first next()
            self._logs(topic, getattr(query, "partitions", None) or (getattr(query, "partition", 0),))
        match query:
            case OffsetQuery():
                gen = self._one(self._by_offset(query.topic, query.partition, query.offset, c))
            case PositionQuery():
                gen = self._one(self._by_position(query.position_id, c))
            case TimeQuery():
                gen = self._by_time(query, c)
            case RangeQuery():
                gen = self._by_range(query, c)
            case KeyQuery():
                gen = self._by_hash(query.topic, "key", _key_attr(query.key), query, committed=c)
            case HeaderQuery():
                attr = self._header_attr(query.name, query.value)
                gen = self._by_hash(query.topic, "header", attr, query, committed=c)
            case IdQuery():
                gen = self._by_id(query, c)
            case ContentQuery():
                gen = self._by_content(query, c)
        return QueryResult(gen)

    # -- helpers ----------------------------------------------------------------------------
    def _refresh(self, topic: str | None) -> None:
        """Pick up what the writer changed, if anything did. When only the topic's active
        segments grew (the directories and the segment files' identities are as last
        seen: the steady state under produce), those segments are extended in place;
        anything else (a roll, a swap, a deletion, a new topic or checkpoint) takes a full
        refresh, which lists each partition's directory and rereads the topics and log
        start offsets."""
        signature = self._signature(topic)
        seen = self._seen.get(topic)
        if signature is not None and signature == seen:
            return
        if signature is not None and seen is not None and signature[0] == seen[0]:
            assert topic is not None  # a signature is only taken of a known topic
            partitions = self.storage.topic(topic).partitions
            if all(self.storage.log(topic, p).extend_active() for p in range(partitions)):
                self._seen[topic] = signature
                return
        self.storage.refresh()
        self._seen[topic] = self._signature(topic)

    def _signature(self, topic: str | None) -> _Signature | None:
        """What the files of ``topic`` look like: (the data, topics and partition
        directories' mtimes, sizes and inodes with the active segment files' inodes;
        the active segment files' sizes). A directory's mtime changes whenever a file in
        it is created, renamed or deleted (a roll, a cleaner swap, a checkpoint)."""
        if topic is None or not self.storage.has_topic(topic):
            return None
        root = self.storage.path
        dirs = [root, root / "topics"]
        actives = []
        for p in range(self.storage.topic(topic).partitions):
            log = self.storage.log(topic, p)
            dirs.append(log.directory)
            if log.segments:
                actives.append(log.segments[-1].log_path)
        try:
            fixed = [
                x for path in dirs for st in [path.stat()] for x in (st.st_mtime_ns, st.st_size, st.st_ino)
            ]
            grown = []
            for path in actives:
                st = path.stat()
                fixed.append(st.st_ino)
                grown.append(st.st_size)
        except FileNotFoundError:
            return None
        return tuple(fixed), tuple(grown)

    def _logs(self, topic: str, partitions: tuple[int, ...] | None) -> dict[int, PartitionLog]:
        info = self.storage.topic(topic)
        wanted = partitions if partitions is not None else tuple(range(info.partitions))
        return {p: self.storage.log(topic, p) for p in wanted}

    @staticmethod
    def _view(log: PartitionLog, committed: bool) -> CommittedView | None:
        """What a read_committed reader sees of ``log``, or ``None`` (everything)."""
        return committed_view(log) if committed else None

    @staticmethod
    def _check_limit(limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise InvalidQueryError(f"limit must be at least 1, got {limit}")

    def _one(self, message: Message) -> Generated:
        yield message
        return Completion(Reason.EXHAUSTED, 1, Stats())

    # -- offset, position, time -----------------------------------------------------------
    def _by_offset(self, topic: str, partition: int, offset: int, committed: bool) -> Message:
        """The record at ``offset``, or the next surviving one: compaction, transaction
        markers and offset gaps leave offsets without a record, and an offset below the
        log start (retention, DeleteRecords) gives the first record. An offset at or
        past the log end raises :class:`OffsetOutOfRangeError`."""
        log = self._logs(topic, (partition,))[partition]
        start, end = log.log_start_offset, log.log_end_offset
        if offset >= end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is past the end of {topic}-{partition}: valid offsets are [{start}, {end - 1}]"
                if end > start
                else f"offset {offset} is past the end of {topic}-{partition}: the partition is empty",
                log_start_offset=start,
                log_end_offset=end,
            )
        record = _at_or_after(log, offset, self._view(log, committed))
        if record is None:
            what = "committed record" if committed else "record"
            raise MessageNotFoundError(f"no {what} at or after offset {offset} in {topic}-{partition}")
        return Message.of(topic, partition, record)

    def _by_position(self, position_id: str, committed: bool) -> Message:
        """What :meth:`_by_offset` gives for the decoded (topic, partition, offset)."""
        decoded = decode_position_id(position_id)
        if decoded is None:
            raise InvalidQueryError(f"{position_id!r} is not a position ID")
        return self._by_offset(*decoded, committed)

    def _exact(self, log: PartitionLog, offset: int) -> Record | None:
        if not log.log_start_offset <= offset < log.log_end_offset:
            return None
        record = _at_or_after(log, offset, data_only=False)
        return record if record is not None and record.offset == offset else None

    @staticmethod
    def _first_visible_at(
        log: PartitionLog, offset: int, timestamp: int, view: CommittedView
    ) -> Record | None:
        """The first record from ``offset`` on stamped ≥ ``timestamp`` that ``view``
        shows (the time index's answer may belong to an aborted transaction)."""
        for header, data in log.batches(offset, view.last_stable_offset):
            if view.hides_batch(header):
                continue
            record = first_stamped(data, header, offset, timestamp)
            if record is not None:
                return record
        return None

    def _by_time(self, q: TimeQuery, committed: bool) -> Generated:
        logs = self._logs(q.topic, q.partitions)
        found = 0
        for p, log in logs.items():
            hit = log.offset_for_timestamp(q.timestamp)
            view = self._view(log, committed)
            if hit is not None:
                if view is None:
                    record = self._exact(log, hit.offset)
                else:
                    record = self._first_visible_at(log, hit.offset, q.timestamp, view)
                if record is not None:
                    found += 1
                    yield Message.of(q.topic, p, record)
        return Completion(Reason.EXHAUSTED, found, Stats())

    # -- time range ---------------------------------------------------------------------------
    def _by_range(self, q: RangeQuery, committed: bool) -> Generated:
        if q.end_ms <= q.start_ms:
            raise InvalidQueryError(f"empty time range: --from {q.start_ms} is not before --to {q.end_ms}")
        self._check_limit(q.limit)
        logs = self._logs(q.topic, q.partitions)
        resume = decode_cursor("range", q.cursor)
        if resume is not None:
            logs = {p: log for p, log in logs.items() if p in resume}
        stats = Stats()

        views = {p: self._view(log, committed) for p, log in logs.items()}

        def stream(p: int, log: PartitionLog) -> Iterator[Record]:
            start = resume.get(p, 0) if resume else 0
            for item in scan_forward(
                log, stats, from_offset=start, start_ms=q.start_ms, end_ms=q.end_ms, view=views[p]
            ):
                if not isinstance(item, int):
                    yield item

        return (
            yield from self._merge(
                q.topic, logs, stream, q.limit, stats, ascending=True, kind="range", resume=resume
            )
        )

    # -- hash lookups -----------------------------------------------------------------------------
    def _header_attr(self, name: str, value: bytes) -> Attribute:
        def matches(r: Record) -> bool:
            return any(k == name and v == value for k, v in r.headers)

        return Attribute(header_digest(name, value), matches, lambda kb: kb.indexes_header(name), value)

    def _by_hash(
        self,
        topic: str,
        kind: str,
        attr: Attribute,
        q: KeyQuery | HeaderQuery | IdQuery,
        *,
        window: tuple[int, int] | None = None,
        stats: Stats | None = None,
        limit: int | None = None,
        committed: bool = True,
    ) -> Generated:
        """Records matching ``attr``, newest first; ``window`` overrides the question's
        time window (the hint stage of a by-ID query)."""
        self._check_limit(q.limit)
        logs = self._logs(topic, q.partitions)
        resume = decode_cursor(kind, q.cursor)
        if resume is not None:
            logs = {p: log for p, log in logs.items() if p in resume}
        stats = stats if stats is not None else Stats()
        start_ms, end_ms = window or (getattr(q, "start_ms", None), getattr(q, "end_ms", None))

        views = {p: self._view(log, committed) for p, log in logs.items()}

        def stream(p: int, log: PartitionLog) -> Iterator[Record]:
            before = resume.get(p) if resume else None
            return lookup_newest_first(
                log, attr, stats, before=before, start_ms=start_ms, end_ms=end_ms, committed=views[p]
            )

        limit = q.limit if limit is None else limit
        return (
            yield from self._merge(
                topic, logs, stream, limit, stats, ascending=False, kind=kind, resume=resume
            )
        )

    def _by_id(self, q: IdQuery, committed: bool) -> Generated:
        """The record a position ID names, then client-ID matches newest first.

        A time-ordered ID's time is a hint: first only records stamped within
        ``hint_window_ms`` of it are looked for, and if there are any the search stops
        there (clocks agreed, so copies sit together). Otherwise, when the client's clock
        was off, every segment is searched. The hint stage filters records by timestamp,
        not just blocks: a match outside the window (one the scan of an unindexed tail
        came across) says nothing about where other copies are."""
        self._check_limit(q.limit)
        info = self.storage.topic(q.topic)
        id_header = info.config.message_id_header
        wanted = q.message_id.encode("utf-8")

        def matches(r: Record) -> bool:
            return any(k == id_header and v == wanted for k, v in r.headers)

        attr = Attribute(id_digest(wanted), matches, lambda kb: kb.indexes_id(id_header), wanted)
        stats = Stats()
        found = 0
        position = decode_position_id(q.message_id)
        if position is not None and position[0] == q.topic and q.cursor is None:
            _, partition, offset = position
            if 0 <= partition < info.partitions and (q.partitions is None or partition in q.partitions):
                log = self.storage.log(q.topic, partition)
                view = self._view(log, committed)
                record = _at_or_after(log, offset, view) if offset < log.log_end_offset else None
                if record is not None:  # as a position query answers it
                    found += 1
                    yield Message.of(q.topic, partition, record)
                    if q.limit is not None and found >= q.limit:
                        return Completion(Reason.LIMIT, found, stats)
        hinted = id_time(q.message_id)
        if hinted is not None and q.cursor is None and not q.exhaustive:
            window = (hinted - q.hint_window_ms, hinted + q.hint_window_ms)
            limit = None if q.limit is None else q.limit - found
            first = yield from self._by_hash(
                q.topic, "id", attr, q, window=window, stats=stats, limit=limit, committed=committed
            )
            if first.results:
                note = "searched the records stamped around the ID's time; pass exhaustive for all"
                return Completion(Reason.HINT, found + first.results, stats, None, (note,))
        rest = yield from self._by_hash(
            q.topic,
            "id",
            attr,
            q,
            stats=stats,
            limit=None if q.limit is None else q.limit - found,
            committed=committed,
        )
        return Completion(rest.reason, found + rest.results, stats, rest.cursor, rest.notes)

    # -- merging partitions -------------------------------------------------------------------------
    def _merge(
        self,
        topic: str,
        logs: dict[int, PartitionLog],
        stream: Callable[[int, PartitionLog], Iterator[Record]],
        limit: int | None,
        stats: Stats,
        *,
        ascending: bool,
        kind: str,
        resume: dict[int, int] | None,
    ) -> Generated:
        """Merge per-partition streams by timestamp (then partition), stopping at
        ``limit``; the cursor holds, per unfinished partition, the offset after (or,
        newest first, of) its last returned record."""
        iters = {p: stream(p, log) for p, log in logs.items()}
        heap: list[tuple[int, int, int, Record]] = []
        sign = 1 if ascending else -1
        for p, it in iters.items():
            record = next(it, None)
            if record is not None:
                heap.append((sign * record.timestamp, p, sign * record.offset, record))
        heapq.heapify(heap)
        marks: dict[int, int] = {}
        count = 0
        while heap:
            if limit is not None and count >= limit:
                pending = {p for _, p, _, _ in heap}
                cursor = {p: marks.get(p, self._start_mark(logs[p], ascending, resume)) for p in pending}
                return Completion(Reason.LIMIT, count, stats, encode_cursor(kind, cursor))
            _, p, _, record = heapq.heappop(heap)
            count += 1
            marks[p] = record.offset + 1 if ascending else record.offset
            yield Message.of(topic, p, record)
            following = next(iters[p], None)
            if following is not None:
                heapq.heappush(heap, (sign * following.timestamp, p, sign * following.offset, following))
        return Completion(Reason.EXHAUSTED, count, stats)

    @staticmethod
    def _start_mark(log: PartitionLog, ascending: bool, resume: dict[int, int] | None) -> int:
        """Where a partition's search started: the cursor's mark, or its beginning."""
        p = log.tp.partition
        if resume is not None and p in resume:
            return resume[p]
        return log.log_start_offset if ascending else log.log_end_offset

    # -- content (the partitions' scans run in threads: .content) -------------------------------
    def _by_content(self, q: ContentQuery, committed: bool) -> Generated:
        self._check_limit(q.limit)
        if q.start_ms is not None and q.end_ms is not None and q.end_ms <= q.start_ms:
            raise InvalidQueryError(f"empty time range: --from {q.start_ms} is not before --to {q.end_ms}")
        logs = self._logs(q.topic, q.partitions)
        resume = decode_cursor("content", q.cursor)
        if resume is not None:
            logs = {p: log for p, log in logs.items() if p in resume}
        views = {p: self._view(log, committed) for p, log in logs.items()}
        budget = Budget(q.budget_bytes, self.content_time_limit_s)
        return (yield from search_content(q, logs, views, resume, budget, self.workers))


def _at_or_after(
    log: PartitionLog, offset: int, view: CommittedView | None = None, *, data_only: bool = True
) -> Record | None:
    """The first record of ``log`` at or after ``max(offset, log start)``, skipping
    control batches (transaction markers) when ``data_only`` and what ``view`` hides;
    ``None`` if there is none. Only that record is decoded (:func:`record_span` skips the
    ones before it)."""
    begin = max(offset, log.log_start_offset)
    for header, data in log.batches(begin, None if view is None else view.last_stable_offset):
        if (data_only and header.is_control) or (view is not None and view.hides_batch(header)):
            continue
        payload = batch_payload(data, header)
        span = record_span(payload, header, begin)
        if span is not None:
            return decode_record(payload[span[1] : span[2]], header)
    return None


def _key_attr(key: bytes) -> Attribute:
    def matches(r: Record) -> bool:
        return r.key == key

    return Attribute(key_digest(key), matches, lambda kb: True, key)
